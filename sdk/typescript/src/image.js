// Image: a builder of the spec `corral image build` reads (a base, then
// steps, each a cached layer on the daemon), built on first use.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { finished } from "node:stream/promises";
import { apiError, CorralError, InvalidArgumentError, NotFoundError } from "./errors.js";
import { Client, enc } from "./client.js";
import { tarTree } from "./tar.js";
import { ndjson } from "./ndjson.js";

/** @typedef {import("../index.js").BuildSpec} BuildSpec */
/** @typedef {import("../index.js").BuildStep} BuildStep */

/**
 * An image definition. Each method returns a new Image (the receiver is
 * unchanged), so a common base can be shared:
 * Image.debian().aptInstall("git").runCommands("make").workdir("/app").
 */
export class Image {
  /**
   * @param {BuildSpec} spec
   * @param {Map<string, string>} [locals] copy step index → local path
   */
  constructor(spec, locals = new Map()) {
    /** @type {BuildSpec} */
    this._spec = spec;
    this._locals = locals;
    /** @type {Map<string, Promise<import("../index.js").ImageInfo>>} by daemon URL */
    this._built = new Map();
  }

  /**
   * A Debian base (mmdebstrap; the daemon's own base root filesystem when
   * it is the same suite and no packages are added).
   * @param {string} [suite] default bookworm
   * @param {{packages?: string[]}} [opts] Debian packages in the base itself
   */
  static debian(suite = "bookworm", opts = {}) {
    requireName("suite", suite);
    const packages = opts.packages === undefined ? undefined : strings("packages", opts.packages);
    return new Image({ base: { debian: suite, packages } });
  }

  /**
   * A base that is a Corral image (name:tag or sha256:...) or, when the
   * daemon has none of that name, a registry reference it pulls.
   * @param {string} ref
   * @param {{insecure?: boolean}} [opts] insecure: a plain-HTTP registry
   */
  static fromRegistry(ref, opts = {}) {
    requireName("ref", ref);
    return new Image({ base: { image: ref, insecure: opts.insecure || undefined } });
  }

  /**
   * @param {BuildStep} step
   * @param {string} [local] a copy step's local path
   */
  _with(step, local) {
    const locals = new Map(this._locals);
    const steps = [...(this._spec.steps ?? []), step];
    if (local !== undefined) locals.set(String(steps.length - 1), local);
    return new Image({ ...this._spec, steps }, locals);
  }

  /**
   * @param {Partial<BuildSpec>} top
   */
  _withTop(top) {
    return new Image({ ...this._spec, ...top }, this._locals);
  }

  /** Installs Debian packages (apt-get, as root). @param {...string} packages */
  aptInstall(...packages) {
    return this._with({ apt_install: nonEmpty("aptInstall", packages.flat()) });
  }

  /**
   * Installs Python packages (python3 -m pip). The last argument may be
   * options: {indexUrl, extraIndexUrl, findLinks, noIndex}.
   * @param {...(string | string[] | import("../index.js").PipOptions)} args
   */
  pipInstall(...args) {
    /** @type {import("../index.js").PipOptions} */
    let o = {};
    const last = args[args.length - 1];
    if (last && typeof last === "object" && !Array.isArray(last)) o = /** @type {any} */ (args.pop());
    const packages = nonEmpty("pipInstall", /** @type {any[]} */ (args).flat());
    return this._with({
      pip_install: {
        packages,
        index_url: o.indexUrl,
        extra_index_url: o.extraIndexUrl === undefined ? undefined : strings("extraIndexUrl", o.extraIndexUrl),
        find_links: o.findLinks === undefined ? undefined : strings("findLinks", o.findLinks),
        no_index: o.noIndex || undefined,
      },
    });
  }

  /** Installs npm packages globally. @param {...string} packages */
  npmInstall(...packages) {
    return this._with({ npm_install: { packages: nonEmpty("npmInstall", packages.flat()) } });
  }

  /** Runs shell commands, in order, as one step (/bin/sh -ec). @param {...string} commands */
  runCommands(...commands) {
    return this._with({ run: nonEmpty("runCommands", commands.flat()) });
  }

  /**
   * Adds a local directory's contents (or one file) at remotePath; it is
   * tarred and uploaded when the image is built, and only a change of its
   * names, modes or contents makes the step run again.
   * @param {string} localPath
   * @param {string} remotePath absolute
   */
  addLocalDir(localPath, remotePath) {
    requireName("localPath", localPath);
    requireName("remotePath", remotePath);
    if (!remotePath.startsWith("/")) {
      throw new InvalidArgumentError(`remotePath ${JSON.stringify(remotePath)}: must be absolute`, { code: "invalid_argument" });
    }
    return this._with({ copy: { src: localPath, dst: remotePath } }, localPath);
  }

  /**
   * Adds one local file at remotePath (remotePath/<name> when it ends in "/").
   * @param {string} localPath
   * @param {string} remotePath
   */
  addLocalFile(localPath, remotePath) {
    return this.addLocalDir(localPath, remotePath);
  }

  /** Sets environment variables for later steps and the image. @param {Record<string, string>} vars */
  env(vars) {
    if (!vars || typeof vars !== "object" || Object.values(vars).some((v) => typeof v !== "string")) {
      throw new InvalidArgumentError("env: must be an object of strings", { code: "invalid_argument" });
    }
    return this._with({ env: { ...vars } });
  }

  /** Sets (and creates) the directory later steps and the image run in. @param {string} path */
  workdir(path) {
    requireName("workdir", path);
    return this._with({ workdir: path });
  }

  /** Sets who later steps and the image's processes run as. @param {string} user */
  user(user) {
    requireName("user", user);
    return this._with({ user });
  }

  /** The image's default command. @param {string[]} argv */
  cmd(argv) {
    return this._withTop({ cmd: nonEmpty("cmd", argv) });
  }

  /**
   * The spec as `corral image build -f` reads it (JSON is YAML): copy
   * sources are local paths, as written.
   * @returns {BuildSpec}
   */
  toSpec() {
    return JSON.parse(JSON.stringify(this._spec));
  }

  /**
   * Builds the image (once per daemon: later calls share the first build);
   * steps built before are cached on the daemon.
   * @param {import("../index.js").ImageBuildOptions} [opts]
   * @returns {Promise<import("../index.js").ImageInfo>}
   */
  build(opts = {}) {
    const client = opts.client ?? new Client({ url: opts.url, token: opts.token });
    const key = client.url;
    if (!opts.force && this._built.has(key)) return /** @type {Promise<any>} */ (this._built.get(key));
    const p = this._build(client, opts);
    this._built.set(key, p);
    p.catch(() => this._built.delete(key));
    return p;
  }

  /**
   * @param {Client} client
   * @param {import("../index.js").ImageBuildOptions} opts
   */
  async _build(client, opts) {
    const spec = this.toSpec();
    for (const [i, local] of this._locals) {
      const step = /** @type {any} */ (spec.steps)[Number(i)];
      step.copy.layer = await uploadLayer(client, local, step.copy.dst, opts.onProgress, Number(i) + 1);
    }
    const resp = await client.request("POST", "/v1/images/build", {
      json: { spec, tag: opts.tag, no_cache: opts.noCache || undefined },
      signal: opts.signal,
    });
    let cached = 0;
    for await (const ev of ndjson(resp, "the build stream")) {
      if (ev.type === "output" && typeof ev.data === "string") ev.text = Buffer.from(ev.data, "base64").toString("utf8");
      if (ev.type === "step" && ev.status === "cached" && ev.step > 0) cached++;
      opts.onProgress?.(ev);
      if (ev.type === "error") throw apiError(0, ev.error?.code ?? "", `building the image: ${ev.error?.message ?? "failed"}`);
      if (ev.type === "done") {
        if (!ev.image) break;
        /** The last build's step counts: how many there were and how many were cached. */
        this.lastBuild = { steps: ev.steps ?? spec.steps?.length ?? 0, cached, image: ev.image };
        return ev.image;
      }
    }
    throw new CorralError("the build stream ended without an image", { code: "unavailable" });
  }
}

/**
 * Tars a copy step's source into a temporary file, uploads it unless the
 * daemon has that layer, and returns its digest.
 * @param {Client} client
 * @param {string} src
 * @param {string} dst
 * @param {((ev: any) => void) | undefined} progress
 * @param {number} step
 */
async function uploadLayer(client, src, dst, progress, step) {
  const dir = await mkdtemp(join(tmpdir(), "corral-layer-"));
  try {
    const file = join(dir, "layer.tar");
    const h = createHash("sha256");
    /** @type {string[]} */
    const skipped = [];
    const out = createWriteStream(file);
    for await (const chunk of tarTree(src, dst, { skipped })) {
      h.update(chunk);
      if (!out.write(chunk)) await new Promise((r) => out.once("drain", () => r(undefined)));
    }
    out.end();
    await finished(out);
    const digest = "sha256:" + h.digest("hex");
    let status = "cached";
    try {
      await client.json("GET", `/v1/images/layers/${enc(digest)}`);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      const body = Readable.toWeb(createReadStream(file));
      const info = await client.json("POST", "/v1/images/layers", { body });
      if (info.digest !== digest) throw new CorralError(`uploaded layer ${digest}, but the daemon stored ${info.digest}`);
      status = "uploaded";
    }
    progress?.({ type: "layer", step, name: `copy ${src}`, status, layer: digest, skipped: skipped.length ? skipped : undefined });
    return digest;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** @param {string} what @param {unknown} v */
function requireName(what, v) {
  if (typeof v !== "string" || v === "") {
    throw new InvalidArgumentError(`${what}: must be a non-empty string`, { code: "invalid_argument" });
  }
}

/** @param {string} what @param {unknown} v @returns {string[]} */
function strings(what, v) {
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string" && x !== "")) {
    throw new InvalidArgumentError(`${what}: must be a list of non-empty strings`, { code: "invalid_argument" });
  }
  return [...v];
}

/** @param {string} what @param {unknown} v */
function nonEmpty(what, v) {
  const list = strings(what, v);
  if (list.length === 0) throw new InvalidArgumentError(`${what}: needs at least one`, { code: "invalid_argument" });
  return list;
}
