// Volume: a named, size-limited store of files that outlives the sandboxes
// that mount it, read and written here without a sandbox too.
import { clientOf, describe, enc, readBody } from "./client.js";
import { ConflictError, ConnectionError, InvalidArgumentError, NotFoundError } from "./errors.js";
import { bodyOf } from "./files.js";

/** @param {string} name @param {string} [tail] */
function volPath(name, tail = "") {
  return `/v1/volumes/${enc(name)}${tail}`;
}

/** @param {unknown} name */
function requireName(name) {
  if (typeof name !== "string" || name === "") {
    throw new InvalidArgumentError("volume name: must be a non-empty string", { code: "invalid_argument" });
  }
  return name;
}

export class Volume {
  /**
   * @param {import("./client.js").Client} client
   * @param {any} info the API's record
   */
  constructor(client, info) {
    this._client = client;
    /** The record as last fetched. */
    this.info = info;
    /** The volume's name. @type {string} */
    this.name = info.name;
  }

  /** Its size limit in GiB. */
  get sizeGiB() {
    return this.info.size_gib;
  }

  /** The live sandboxes that mount it, as last fetched. @returns {string[]} */
  get mountedBy() {
    return this.info.mounted_by ?? [];
  }

  /**
   * Makes a volume (ConflictError if the name is taken).
   * @param {string} name
   * @param {{sizeGiB?: number} & import("../index.js").ClientOptions} [opts] sizeGiB default: the daemon's (1)
   */
  static async create(name, opts = {}) {
    const client = clientOf(opts);
    const s = opts.sizeGiB;
    if (s !== undefined && (!Number.isInteger(s) || s < 1)) {
      throw new InvalidArgumentError(`sizeGiB: must be a positive integer, not ${JSON.stringify(s)}`, { code: "invalid_argument" });
    }
    return new Volume(client, await client.json("POST", "/v1/volumes", { json: { name: requireName(name), size_gib: s } }));
  }

  /**
   * The volume called name (NotFoundError), or a new one if createIfMissing.
   * @param {string} name
   * @param {{createIfMissing?: boolean, sizeGiB?: number} & import("../index.js").ClientOptions} [opts]
   */
  static async fromName(name, opts = {}) {
    const client = clientOf(opts);
    try {
      return new Volume(client, await client.json("GET", volPath(requireName(name))));
    } catch (err) {
      if (!(err instanceof NotFoundError) || !opts.createIfMissing) throw err;
    }
    try {
      return await Volume.create(name, { ...opts, client });
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err; // made meanwhile by someone else
      return new Volume(client, await client.json("GET", volPath(name)));
    }
  }

  /**
   * Every volume.
   * @param {import("../index.js").ClientOptions} [opts]
   */
  static async list(opts = {}) {
    const client = clientOf(opts);
    const r = await client.json("GET", "/v1/volumes");
    return (r.volumes ?? []).map((/** @type {any} */ v) => new Volume(client, v));
  }

  /** Fetches the record again (usage, mounts). */
  async refresh() {
    this.info = await this._client.json("GET", volPath(this.name));
    return this.info;
  }

  /**
   * Deletes the volume and its files; refused (ConflictError) while live
   * sandboxes mount it, unless force, which terminates them first.
   * @param {{force?: boolean}} [opts]
   */
  async remove(opts = {}) {
    await this._client.json("DELETE", volPath(this.name), { query: { force: opts.force ? "true" : undefined } });
  }

  /**
   * A mount of this volume for Sandbox.create({volumes: [...]}).
   * @param {string} path
   * @param {{readOnly?: boolean}} [opts]
   */
  mount(path, opts = {}) {
    return { name: this.name, path, read_only: opts.readOnly ?? false };
  }

  /**
   * A file's bytes (no sandbox needed).
   * @param {string} path
   */
  async read(path) {
    const resp = await this._client.request("GET", volPath(this.name, "/files"), { query: { path } });
    try {
      return new Uint8Array(await resp.arrayBuffer());
    } catch (err) {
      throw new ConnectionError(`reading ${path} broke: ${describe(err)}`, { code: "unavailable", cause: err });
    }
  }

  /**
   * A file's text (UTF-8).
   * @param {string} path
   */
  async readText(path) {
    return readBody(await this._client.request("GET", volPath(this.name, "/files"), { query: { path } }));
  }

  /**
   * Writes a file of the volume (parents created), streamed from a string,
   * bytes, a ReadableStream or an async iterable of bytes.
   * @param {string} path
   * @param {import("../index.js").WriteData} data
   * @param {{mode?: number | string}} [opts]
   */
  write(path, data, opts = {}) {
    const mode = typeof opts.mode === "number" ? "0" + opts.mode.toString(8) : opts.mode;
    return this._client.json("PUT", volPath(this.name, "/files"), { query: { path, mode }, body: bodyOf(data) });
  }

  /**
   * A directory's entries ("/": the volume's root).
   * @param {string} [path]
   */
  async list(path = "/") {
    const r = await this._client.json("GET", volPath(this.name, "/list"), { query: { path } });
    return r.entries ?? [];
  }
}

/**
 * The API's volumes from {"/path": name or Volume} or a list of mounts.
 * @param {any} v
 */
export function volumeMounts(v) {
  if (v === undefined || v === null) return undefined;
  if (Array.isArray(v)) {
    return v.map((m) => {
      if (!m || typeof m !== "object") {
        throw new InvalidArgumentError("volumes: each mount is {name, path, read_only?}", { code: "invalid_argument" });
      }
      return m.name instanceof Volume ? { ...m, name: m.name.name } : m;
    });
  }
  if (typeof v !== "object") {
    throw new InvalidArgumentError('volumes: {"/path": name or Volume} or a list of mounts', { code: "invalid_argument" });
  }
  return Object.entries(v).map(([path, name]) => {
    const n = name instanceof Volume ? name.name : name;
    if (typeof n !== "string") {
      throw new InvalidArgumentError(`volumes: ${path}: a volume name or a Volume`, { code: "invalid_argument" });
    }
    return { name: n, path };
  });
}
