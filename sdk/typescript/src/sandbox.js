// Sandbox: Modal's Sandbox in TypeScript idiom over Corral's native API.
import { clientOf, enc } from "./client.js";
import { InvalidArgumentError, NotFoundError } from "./errors.js";
import { SandboxFiles } from "./files.js";
import { ContainerProcess } from "./process.js";
import { Image } from "./image.js";
import { Tunnel } from "./tunnel.js";
import { SandboxFile } from "./open.js";
import { secretNames } from "./secret.js";
import { volumeMounts } from "./volume.js";

export class Sandbox {
  /**
   * @param {import("./client.js").Client} client
   * @param {any} info the API's record
   */
  constructor(client, info) {
    this._client = client;
    /** The record as last fetched. */
    this.info = info;
    /** The sandbox's id. @type {string} */
    this.sandboxId = info.id;
    /** Its filesystem. */
    this.files = new SandboxFiles(client, info.id);
  }

  /**
   * Creates a sandbox; resolves once it runs.
   * @param {import("../index.js").CreateOptions} [opts]
   */
  static async create(opts = {}) {
    const client = clientOf(opts);
    let image = opts.image;
    if (image instanceof Image) {
      image = (await image.build({ client, onProgress: opts.onBuildProgress })).digest;
    }
    const info = await client.json("POST", "/v1/sandboxes", { json: { ...createBody(opts), image } });
    return new Sandbox(client, info);
  }

  /**
   * The sandbox with this id (NotFoundError if none).
   * @param {string} id
   * @param {import("../index.js").ClientOptions} [opts]
   */
  static async fromId(id, opts = {}) {
    const client = clientOf(opts);
    requireString("id", id);
    return new Sandbox(client, await client.json("GET", `/v1/sandboxes/${enc(id)}`));
  }

  /**
   * The live sandbox with this name (an ended name: its newest sandbox).
   * @param {string} name
   * @param {import("../index.js").ClientOptions} [opts]
   */
  static fromName(name, opts = {}) {
    return Sandbox.fromId(name, opts);
  }

  /**
   * Sandboxes, oldest first, every page; tags all must match (a null value: any).
   * @param {{tags?: Record<string, string | null>, states?: string[]} & import("../index.js").ClientOptions} [opts]
   */
  static async list(opts = {}) {
    const client = clientOf(opts);
    const tag = Object.entries(opts.tags ?? {}).map(([k, v]) => (v === null || v === undefined ? k : `${k}=${v}`));
    const out = [];
    let next;
    do {
      const page = await client.json("GET", "/v1/sandboxes", { query: { tag, state: opts.states?.join(","), next } });
      for (const s of page.sandboxes ?? []) out.push(new Sandbox(client, s));
      next = page.next;
    } while (next);
    return out;
  }

  /** @param {string} tail */
  _path(tail = "") {
    return `/v1/sandboxes/${enc(this.sandboxId)}${tail}`;
  }

  /**
   * Starts a process; its output streams as it comes.
   * @param {string[]} args
   * @param {import("../index.js").ExecOptions} [opts]
   */
  async exec(args, opts = {}) {
    if (!Array.isArray(args) || args.length === 0 || !args.every((a) => typeof a === "string")) {
      throw new InvalidArgumentError("args: must be a non-empty array of strings", { code: "invalid_argument" });
    }
    const pty = opts.pty === true ? { cols: 80, rows: 24 } : opts.pty || undefined;
    const abort = new AbortController();
    const resp = await this._client.request("POST", this._path("/processes"), {
      json: {
        cmd: args,
        cwd: opts.workdir,
        env: opts.env,
        user: opts.user,
        timeout: opts.timeout,
        stdin: opts.stdin ?? true,
        pty,
        kill_tree: opts.killTree,
        secrets: secretNames(opts.secrets),
      },
      signal: abort.signal,
    });
    return new ContainerProcess(this._client, this.sandboxId, resp, abort);
  }

  /**
   * Opens a file: "r"/"rb" streams it in, "w"/"wb" replaces it and "a"/"ab"
   * appends to it on close(), the writes streamed as they are made.
   * @param {string} path
   * @param {string} [mode]
   * @param {{user?: string}} [opts]
   */
  open(path, mode = "r", opts = {}) {
    return SandboxFile.open(this.files, path, mode, opts);
  }

  /** Fetches the record again. */
  async refresh() {
    this.info = await this._client.json("GET", this._path());
    return this.info;
  }

  /** Ends the sandbox (idempotent); returns the final record. */
  async terminate() {
    this.info = await this._client.json("DELETE", this._path());
    return this.info;
  }

  /**
   * Waits for the sandbox to end.
   * @param {{timeout?: number}} [opts] seconds, then DeadlineExceededError
   * @returns {Promise<{exit_code: number, end_reason: string, error?: string}>}
   */
  wait(opts = {}) {
    return this._client.json("POST", this._path("/wait"), { query: { timeout: opts.timeout } });
  }

  /** The exit code if it ended, else null. */
  async poll() {
    const info = await this.refresh();
    return info.ended_at ? info.exit_code ?? null : null;
  }

  /**
   * Merges tags (a null value removes the tag).
   * @param {Record<string, string | null>} tags
   */
  async setTags(tags) {
    this.info = await this._client.json("PATCH", this._path(), { json: { tags } });
    return this.info;
  }

  /**
   * Ends the lifetime this many seconds from now (extendOnly: never earlier).
   * @param {number} seconds
   * @param {{extendOnly?: boolean}} [opts]
   */
  async setTimeout(seconds, opts = {}) {
    this.info = await this._client.json("PATCH", this._path(), { json: { timeout: seconds, extend_only: opts.extendOnly } });
    return this.info;
  }

  /** Saves the sandbox to disk, freeing its CPU and memory. */
  async pause() {
    this.info = await this._client.json("POST", this._path("/pause"));
    return this.info;
  }

  /** Brings a paused sandbox back. */
  async resume() {
    this.info = await this._client.json("POST", this._path("/resume"));
    return this.info;
  }

  /**
   * A memory snapshot (memory, processes, files); start copies with
   * Sandbox.create({fromSnapshot}). Streams in flight end.
   * @param {{name?: string}} [opts]
   */
  snapshot(opts = {}) {
    return this._client.json("POST", this._path("/snapshots/memory"), { json: { name: opts.name } });
  }

  /**
   * An image of the sandbox's files.
   * @param {{tag?: string}} [opts]
   */
  snapshotFilesystem(opts = {}) {
    return this._client.json("POST", this._path("/snapshots/fs"), { json: { tag: opts.tag } });
  }

  /**
   * The exposed ports (create's `expose`), by port, with their URLs.
   * @returns {Promise<Record<number, Tunnel>>}
   */
  async tunnels() {
    const info = await this.refresh();
    /** @type {Record<number, Tunnel>} */
    const out = {};
    for (const p of info.ports ?? []) out[p.port] = new Tunnel(this._client, this.sandboxId, p, info.port_token ?? "");
    return out;
  }

  /**
   * One exposed port (NotFoundError if it is not exposed).
   * @param {number} port
   */
  async tunnel(port) {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new InvalidArgumentError(`port: must be an integer from 1 to 65535, not ${JSON.stringify(port)}`, { code: "invalid_argument" });
    }
    const t = (await this.tunnels())[port];
    if (!t) {
      throw new NotFoundError(`port ${port} of sandbox ${this.sandboxId} is not exposed (create it with expose: [${port}])`, { code: "not_found", status: 404 });
    }
    return t;
  }

  /**
   * Running copies of the sandbox (1 to 16).
   * @param {number} [count]
   */
  async fork(count = 1) {
    const r = await this._client.json("POST", this._path("/fork"), { json: { count } });
    return r.sandboxes.map((/** @type {any} */ s) => new Sandbox(this._client, s));
  }
}

/**
 * @param {string} what
 * @param {unknown} v
 */
function requireString(what, v) {
  if (typeof v !== "string" || v === "") {
    throw new InvalidArgumentError(`${what}: must be a non-empty string`, { code: "invalid_argument" });
  }
}

/**
 * A request and limit pair, or one number for both.
 * @param {number | [number, number] | undefined} v
 */
function pair(v) {
  return Array.isArray(v) ? v : [v, undefined];
}

/** @param {import("../index.js").CreateOptions} o */
function createBody(o) {
  const [cpu, cpuLimit] = pair(o.cpu);
  const [mem, memLimit] = pair(o.memory);
  return {
    image: o.image,
    runtime: o.runtime,
    cpu,
    cpu_limit: cpuLimit,
    memory_mb: mem,
    memory_limit_mb: memLimit,
    disk_mb: o.disk,
    timeout: o.timeout,
    idle_timeout: o.idleTimeout,
    workdir: o.workdir,
    user: o.user,
    env: o.env,
    name: o.name,
    tags: o.tags,
    entrypoint: o.cmd,
    expose: o.expose?.map((p) => (typeof p === "number" ? { port: p } : p)),
    from_snapshot: o.fromSnapshot,
    volumes: volumeMounts(o.volumes),
    block_network: o.blockNetwork,
    cidr_allowlist: o.cidrAllowlist,
    domain_allowlist: o.domainAllowlist,
    secrets: secretNames(o.secrets),
    secret_headers: o.secretHeaders,
  };
}
