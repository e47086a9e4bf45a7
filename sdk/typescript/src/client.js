// The HTTP client: where the daemon is, its token, and how a request and
// its error answer are spoken.
import { readFileSync } from "node:fs";
import { apiError, ConnectionError, CorralError, InvalidArgumentError } from "./errors.js";

/** Where the daemon listens unless told otherwise (as the CLI). */
export const DEFAULT_URL = "http://127.0.0.1:7070";
/** Where the daemon writes its token by default (as the CLI). */
export const DEFAULT_TOKEN_FILE = "/var/lib/corral/token";

/** A connection to a Corral daemon. */
export class Client {
  /**
   * @param {{url?: string, token?: string}} [opts] default: CORRAL_URL and
   *   CORRAL_TOKEN (or the file CORRAL_TOKEN_FILE, else /var/lib/corral/token)
   */
  constructor(opts = {}) {
    const url = opts.url ?? process.env.CORRAL_URL ?? DEFAULT_URL;
    let parsed;
    try {
      parsed = new URL(url);
    } catch {
      throw new InvalidArgumentError(`url: not a URL: ${JSON.stringify(url)}`, { code: "invalid_argument" });
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new InvalidArgumentError(`url: must be http or https, not ${parsed.protocol}`, { code: "invalid_argument" });
    }
    this.url = url.replace(/\/+$/, "");
    this.token = opts.token ?? process.env.CORRAL_TOKEN ?? readToken();
  }

  /**
   * Sends a request; returns the Response of a 2xx answer, throws the typed
   * error of any other.
   * @param {string} method
   * @param {string} path under the base URL, starting /v1
   * @param {{query?: Record<string, any>, json?: unknown, body?: any, signal?: AbortSignal, headers?: Record<string,string>}} [opts]
   * @returns {Promise<Response>}
   */
  async request(method, path, opts = {}) {
    const headers = { ...(opts.headers ?? {}) };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    /** @type {RequestInit & {duplex?: string}} */
    const init = { method, headers, signal: opts.signal };
    if (opts.json !== undefined) {
      headers["content-type"] = "application/json";
      init.body = JSON.stringify(opts.json);
    } else if (opts.body !== undefined) {
      headers["content-type"] = "application/octet-stream";
      init.body = opts.body;
      if (typeof opts.body?.getReader === "function") init.duplex = "half";
    }
    let resp;
    try {
      resp = await fetch(this.url + path + queryString(opts.query), init);
    } catch (err) {
      if (err?.name === "AbortError") throw err;
      throw new ConnectionError(`cannot reach the Corral daemon at ${this.url}: ${describe(err)}`, {
        code: "unavailable",
        cause: err,
      });
    }
    if (resp.ok) return resp;
    throw await errorOf(resp);
  }

  /**
   * A request whose answer is JSON (or nothing, 204).
   * @param {string} method
   * @param {string} path
   * @param {{query?: Record<string, any>, json?: unknown, body?: any}} [opts]
   */
  async json(method, path, opts) {
    const resp = await this.request(method, path, opts);
    const text = await readBody(resp);
    return text ? JSON.parse(text) : undefined;
  }
}

/** @param {Response} resp */
async function errorOf(resp) {
  let text = "";
  try {
    text = await resp.text();
  } catch {
    // the body broke; the status still says what happened
  }
  let code = "", message = text.trim();
  try {
    const e = JSON.parse(text).error;
    code = e?.code ?? "";
    message = e?.message ?? message;
  } catch {
    // not JSON: keep the text
  }
  return apiError(resp.status, code, message);
}

/** @param {Response} resp */
export async function readBody(resp) {
  try {
    return await resp.text();
  } catch (err) {
    throw new ConnectionError(`the connection to the daemon broke: ${describe(err)}`, { code: "unavailable", cause: err });
  }
}

/** @param {Record<string, any> | undefined} q */
function queryString(q) {
  if (!q) return "";
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined || v === null || v === "") continue;
    if (Array.isArray(v)) for (const x of v) p.append(k, String(x));
    else p.append(k, String(v));
  }
  const s = p.toString();
  return s ? "?" + s : "";
}

/** @param {unknown} err */
export function describe(err) {
  const e = /** @type {any} */ (err);
  const cause = e?.cause;
  if (cause?.code) return `${cause.code}${cause.message ? ` (${cause.message})` : ""}`;
  return e?.message ?? String(err);
}

function readToken() {
  const path = process.env.CORRAL_TOKEN_FILE || DEFAULT_TOKEN_FILE;
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    // No token: calls will be refused with an AuthenticationError naming it.
    return "";
  }
}

/**
 * The client an options object names: its client, else one from its url and token.
 * @param {any} opts
 */
export function clientOf(opts) {
  if (opts.client) return opts.client;
  return new Client({ url: opts.url, token: opts.token });
}

/** @param {string} s */
export function enc(s) {
  return encodeURIComponent(s);
}

export { CorralError };
