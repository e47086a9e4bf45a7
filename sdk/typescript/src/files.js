// SandboxFiles: a sandbox's filesystem over the daemon's /files (streamed
// bytes) and /fs (metadata) calls.
import { createReadStream, createWriteStream } from "node:fs";
import { rename as renameLocal, rm } from "node:fs/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ConnectionError, InvalidArgumentError } from "./errors.js";
import { describe, enc, readBody } from "./client.js";
import { FileWatch } from "./watch.js";

export class SandboxFiles {
  /**
   * @param {import("./client.js").Client} client
   * @param {string} id
   */
  constructor(client, id) {
    this._client = client;
    this._id = id;
  }

  /** @param {string} p */
  _path(p) {
    return `/v1/sandboxes/${enc(this._id)}${p}`;
  }

  /**
   * A file's bytes as a stream, read as it comes (for large files).
   * @param {string} path
   * @param {{user?: string}} [opts]
   * @returns {Promise<ReadableStream<Uint8Array>>}
   */
  async readStream(path, opts = {}) {
    const resp = await this._client.request("GET", this._path("/files"), { query: { path, user: opts.user } });
    return /** @type {ReadableStream<Uint8Array>} */ (resp.body);
  }

  /**
   * A file's bytes.
   * @param {string} path
   * @param {{user?: string}} [opts]
   */
  async read(path, opts = {}) {
    const resp = await this._client.request("GET", this._path("/files"), { query: { path, user: opts.user } });
    try {
      return new Uint8Array(await resp.arrayBuffer());
    } catch (err) {
      throw new ConnectionError(`reading ${path} broke: ${describe(err)}`, { code: "unavailable", cause: err });
    }
  }

  /**
   * A file's text (UTF-8).
   * @param {string} path
   * @param {{user?: string}} [opts]
   */
  async readText(path, opts = {}) {
    const resp = await this._client.request("GET", this._path("/files"), { query: { path, user: opts.user } });
    return readBody(resp);
  }

  /**
   * Writes a file (parents created; replaced atomically) from a string
   * (UTF-8), bytes, a web ReadableStream or any async iterable of bytes
   * (a Node stream such as fs.createReadStream): streams are sent as they
   * are read, never held whole.
   * @param {string} path
   * @param {string | Uint8Array | ArrayBuffer | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>} data
   * @param {{mode?: number | string, user?: string}} [opts] mode: octal permissions (0o644 or "0644")
   * @returns {Promise<import("../index.js").FileEntry>}
   */
  async write(path, data, opts = {}) {
    const mode = typeof opts.mode === "number" ? "0" + opts.mode.toString(8) : opts.mode;
    return this._client.json("PUT", this._path("/files"), {
      query: { path, user: opts.user, mode },
      body: bodyOf(data),
    });
  }

  /**
   * Copies a local file into the sandbox, streamed (never held whole).
   * @param {string} localPath
   * @param {string} remotePath
   * @param {{mode?: number | string, user?: string}} [opts]
   */
  copyFromLocal(localPath, remotePath, opts = {}) {
    return this.write(remotePath, createReadStream(localPath), opts);
  }

  /**
   * Copies a file of the sandbox to a local path, streamed; the local file
   * appears whole or not at all (written beside it, then renamed).
   * @param {string} remotePath
   * @param {string} localPath
   * @param {{user?: string}} [opts]
   */
  async copyToLocal(remotePath, localPath, opts = {}) {
    const body = await this.readStream(remotePath, opts);
    const part = `${localPath}.corral-part-${process.pid}`;
    try {
      await pipeline(Readable.fromWeb(/** @type {any} */ (body)), createWriteStream(part));
      await renameLocal(part, localPath);
    } catch (err) {
      await rm(part, { force: true });
      if (err instanceof Error && "code" in err && typeof err.code === "string" && err.code.startsWith("E")) throw err;
      throw new ConnectionError(`reading ${remotePath} broke: ${describe(err)}`, { code: "unavailable", cause: err });
    }
  }

  /**
   * A directory's entries (depth 1 to 16).
   * @param {string} path
   * @param {{depth?: number, user?: string}} [opts]
   */
  async list(path, opts = {}) {
    const r = await this._client.json("GET", this._path("/fs/list"), { query: { path, depth: opts.depth, user: opts.user } });
    return r.entries ?? [];
  }

  /**
   * Describes a path (a symlink itself).
   * @param {string} path
   * @param {{user?: string}} [opts]
   */
  stat(path, opts = {}) {
    return this._client.json("GET", this._path("/fs/stat"), { query: { path, user: opts.user } });
  }

  /**
   * Whether a path exists.
   * @param {string} path
   */
  async exists(path) {
    try {
      await this.stat(path);
      return true;
    } catch (err) {
      if (/** @type {any} */ (err)?.code === "not_found") return false;
      throw err;
    }
  }

  /**
   * Creates a directory and its parents.
   * @param {string} path
   * @param {{mode?: number, user?: string}} [opts]
   */
  mkdir(path, opts = {}) {
    return this._client.json("POST", this._path("/fs/mkdir"), { json: { path, mode: opts.mode, user: opts.user } });
  }

  /**
   * Removes a path (a directory with all in it).
   * @param {string} path
   * @param {{user?: string}} [opts]
   */
  async remove(path, opts = {}) {
    await this._client.json("POST", this._path("/fs/remove"), { json: { path, recursive: true, user: opts.user } });
  }

  /**
   * Watches a directory: `for await (const ev of sb.files.watch(dir))`
   * yields create, write, remove, rename, chmod, overflow and a last end
   * event. Await `.ready` before changing what it watches to see every
   * change; `.close()` (or breaking out of the loop) stops it.
   * @param {string} path a directory
   * @param {{recursive?: boolean, user?: string}} [opts] recursive: directories that appear below are followed
   * @returns {FileWatch}
   */
  watch(path, opts = {}) {
    if (typeof path !== "string" || path === "") {
      throw new InvalidArgumentError("path: must be a non-empty string", { code: "invalid_argument" });
    }
    return new FileWatch(this._client, this._path("/files/watch"), { path, recursive: opts.recursive || undefined, user: opts.user });
  }

  /**
   * Renames a path.
   * @param {string} from
   * @param {string} to
   * @param {{user?: string}} [opts]
   */
  rename(from, to, opts = {}) {
    return this._client.json("POST", this._path("/fs/rename"), { json: { from, to, user: opts.user } });
  }
}

/** @param {any} data */
export function bodyOf(data) {
  if (typeof data === "string") return Buffer.from(data);
  if (data instanceof Uint8Array || data instanceof ArrayBuffer) return data;
  if (data && typeof data.getReader === "function") return data;
  if (data && typeof data[Symbol.asyncIterator] === "function") {
    return /** @type {ReadableStream} */ (Readable.toWeb(Readable.from(data)));
  }
  throw new InvalidArgumentError("data: must be a string, bytes, a ReadableStream or an async iterable of bytes", { code: "invalid_argument" });
}
