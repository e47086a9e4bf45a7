// Secret: named credentials the daemon keeps encrypted; no call returns a
// value, and no error here quotes one.
import { clientOf, enc } from "./client.js";
import { InvalidArgumentError } from "./errors.js";

/** @param {string} name */
function secPath(name) {
  return `/v1/secrets/${enc(name)}`;
}

/** @param {unknown} name */
function requireName(name) {
  if (typeof name !== "string" || name === "") {
    throw new InvalidArgumentError("secret name: must be a non-empty string", { code: "invalid_argument" });
  }
  return name;
}

/** @param {unknown} values */
function checkValues(values) {
  if (!values || typeof values !== "object" || Array.isArray(values) || Object.keys(values).length === 0) {
    throw new InvalidArgumentError("values: must be a non-empty object of string keys to string values", { code: "invalid_argument" });
  }
  for (const [k, v] of Object.entries(values)) {
    if (typeof v !== "string") {
      throw new InvalidArgumentError(`values: key ${JSON.stringify(k)}: must be a string (got a ${typeof v})`, { code: "invalid_argument" });
    }
  }
  return values;
}

export class Secret {
  /**
   * @param {import("./client.js").Client} client
   * @param {any} info the API's record: name and keys
   */
  constructor(client, info) {
    this._client = client;
    /** The record as last fetched (never a value). */
    this.info = info;
    /** The secret's name. @type {string} */
    this.name = info.name;
  }

  /** Its keys (never values). @returns {string[]} */
  get keys() {
    return this.info.keys ?? [];
  }

  /**
   * Stores values (ConflictError if the name is taken).
   * @param {string} name
   * @param {Record<string, string>} values env-style keys to values
   * @param {import("../index.js").ClientOptions} [opts]
   */
  static async create(name, values, opts = {}) {
    const client = clientOf(opts);
    return new Secret(client, await client.json("POST", "/v1/secrets", { json: { name: requireName(name), values: checkValues(values) } }));
  }

  /**
   * The secret called name (NotFoundError if none).
   * @param {string} name
   * @param {import("../index.js").ClientOptions} [opts]
   */
  static async fromName(name, opts = {}) {
    const client = clientOf(opts);
    return new Secret(client, await client.json("GET", secPath(requireName(name))));
  }

  /**
   * Every secret's name and keys.
   * @param {import("../index.js").ClientOptions} [opts]
   */
  static async list(opts = {}) {
    const client = clientOf(opts);
    const r = await client.json("GET", "/v1/secrets");
    return (r.secrets ?? []).map((/** @type {any} */ s) => new Secret(client, s));
  }

  /**
   * Replaces all its values: running sandboxes keep the env they started
   * with; header injection uses the new values from the next request.
   * @param {Record<string, string>} values
   */
  async rotate(values) {
    this.info = await this._client.json("PUT", secPath(this.name), { json: { values: checkValues(values) } });
    return this;
  }

  /** Deletes the secret (header injection from it stops). */
  async remove() {
    await this._client.json("DELETE", secPath(this.name));
  }

  /**
   * An egress header rule for Sandbox.create({secretHeaders: [...]}):
   * TLS requests to host (port 443; GET, HEAD, POST, PUT, PATCH, DELETE,
   * OPTIONS; never plain HTTP, never TRACE) get header (default
   * Authorization) set to template with "{value}" replaced by this secret's
   * key (default: the value alone).
   * @param {string} key
   * @param {string} host
   * @param {{header?: string, template?: string}} [opts]
   */
  header(key, host, opts = {}) {
    return { secret: this.name, key, host, header: opts.header ?? "Authorization", template: opts.template };
  }
}

/**
 * The API's secrets from names or Secret objects.
 * @param {any} v
 */
export function secretNames(v) {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) {
    throw new InvalidArgumentError("secrets: must be an array of names or Secrets", { code: "invalid_argument" });
  }
  return v.map((s) => (s instanceof Secret ? s.name : s));
}
