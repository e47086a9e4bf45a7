// SandboxFile: a file of a sandbox opened for reading, writing or
// appending (Sandbox.open), streamed both ways: a write goes out as it is
// made, and the file is replaced (atomically) when it is closed.
import { PassThrough } from "node:stream";
import { CorralError, InvalidArgumentError, NotFoundError } from "./errors.js";

const MODES = ["r", "rb", "w", "wb", "a", "ab"];

export class SandboxFile {
  /**
   * @param {import("./files.js").SandboxFiles} files
   * @param {string} path
   * @param {string} mode
   * @param {ReadableStream<Uint8Array> | null} body the file's bytes (read mode)
   * @param {{user?: string}} opts
   */
  constructor(files, path, mode, body, opts) {
    this.path = path;
    this.mode = mode;
    this._body = body;
    this._closed = false;
    /** @type {PassThrough | null} */
    this._out = null;
    /** @type {Promise<any> | null} */
    this._upload = null;
    if (!body) this._startWrite(files, opts);
  }

  /**
   * @param {string} path
   * @param {string} mode
   * @param {import("./files.js").SandboxFiles} files
   * @param {{user?: string}} opts
   */
  static async open(files, path, mode, opts) {
    if (!MODES.includes(mode)) {
      throw new InvalidArgumentError(`mode ${JSON.stringify(mode)}: want one of ${MODES.join(", ")}`, { code: "invalid_argument" });
    }
    if (typeof path !== "string" || path === "") {
      throw new InvalidArgumentError("path: must be a non-empty string", { code: "invalid_argument" });
    }
    const body = mode.startsWith("r") ? await files.readStream(path, opts) : null;
    return new SandboxFile(files, path, mode, body, opts);
  }

  /**
   * @param {import("./files.js").SandboxFiles} files
   * @param {{user?: string}} opts
   */
  _startWrite(files, opts) {
    const out = new PassThrough();
    this._out = out;
    const path = this.path, append = this.mode.startsWith("a");
    async function* source() {
      if (append) {
        let old = null;
        try {
          old = await files.readStream(path, opts);
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
        }
        if (old) for await (const c of /** @type {any} */ (old)) yield c;
      }
      for await (const c of out) yield c;
    }
    this._upload = files.write(path, source(), { user: opts.user });
    this._upload.catch(() => out.destroy());
  }

  /**
   * Writes data (a string is UTF-8); resolves once it is on its way.
   * @param {string | Uint8Array} data
   */
  async write(data) {
    const out = this._out;
    if (!out || this._closed) throw new CorralError(`${this.path} is not open for writing`, { code: "failed_precondition" });
    if (out.write(typeof data === "string" ? Buffer.from(data) : data)) return;
    await Promise.race([new Promise((r) => out.once("drain", () => r(undefined))), /** @type {Promise<any>} */ (this._upload)]);
  }

  /** Everything (left) to read, as bytes. */
  async read() {
    const parts = [];
    for await (const c of this) parts.push(c);
    return new Uint8Array(Buffer.concat(parts));
  }

  /** Everything (left) to read, as text. */
  async readText() {
    return Buffer.from(await this.read()).toString("utf8");
  }

  /** The bytes as they arrive (read mode). @returns {AsyncGenerator<Uint8Array>} */
  async *[Symbol.asyncIterator]() {
    if (!this._body) throw new CorralError(`${this.path} is not open for reading`, { code: "failed_precondition" });
    const body = this._body;
    this._body = null;
    for await (const c of /** @type {any} */ (body)) yield c;
  }

  /** Ends the file: a written one is replaced now; resolves with its entry (writing) or nothing. */
  async close() {
    if (this._closed) return this._upload ?? undefined;
    this._closed = true;
    if (this._out) {
      this._out.end();
      return await this._upload;
    }
    await this._body?.cancel().catch(() => {});
    return undefined;
  }
}
