// Tunnel: an exposed port of a sandbox, reached through the daemon (the
// API's /ports proxy for HTTP and WebSocket, /tunnel for raw TCP).
import http from "node:http";
import https from "node:https";
import { ConnectionError, CorralError, apiError } from "./errors.js";
import { describe, enc } from "./client.js";

export class Tunnel {
  /**
   * @param {import("./client.js").Client} client
   * @param {string} sandboxId
   * @param {{port: number, public?: boolean, url?: string}} p the record's port
   * @param {string} portToken
   */
  constructor(client, sandboxId, p, portToken) {
    this._client = client;
    this._sandboxId = sandboxId;
    /** The port inside the sandbox. @type {number} */
    this.port = p.port;
    /** Whether anyone may use it without a token. @type {boolean} */
    this.public = !!p.public;
    const base = client.url + (p.url ?? `/v1/sandboxes/${enc(sandboxId)}/ports/${p.port}/`);
    /** The port's HTTP URL, its token included unless it is public. @type {string} */
    this.url = this.public ? base : `${base}?corral_token=${encodeURIComponent(portToken)}`;
    /** The URL without the token (send `token` as X-Corral-Port-Token). @type {string} */
    this.baseUrl = base;
    /** The sandbox's port token ("" for a public port). @type {string} */
    this.token = this.public ? "" : portToken;
  }

  /**
   * The URL of a path on the port ("/index.html"), its token included
   * unless the port is public.
   * @param {string} [path]
   */
  urlOf(path = "/") {
    const u = new URL(this.baseUrl.replace(/\/$/, "") + (path.startsWith("/") ? path : "/" + path));
    if (this.token) u.searchParams.set("corral_token", this.token);
    return u.toString();
  }

  /**
   * fetch() of a path on the port, the token sent as a header.
   * @param {string} [path]
   * @param {RequestInit} [init]
   */
  fetch(path = "/", init = {}) {
    const headers = new Headers(init.headers);
    if (this.token) headers.set("x-corral-port-token", this.token);
    const u = this.baseUrl.replace(/\/$/, "") + (path.startsWith("/") ? path : "/" + path);
    return fetch(u, { ...init, headers });
  }

  /**
   * Opens a raw TCP stream to the port (HTTP Upgrade: corral-tcp on the
   * daemon's /tunnel); the socket carries the port's own protocol.
   * @returns {Promise<import("node:net").Socket>}
   */
  connect() {
    const u = new URL(`${this._client.url}/v1/sandboxes/${enc(this._sandboxId)}/tunnel/${this.port}`);
    /** @type {Record<string, string>} */
    const headers = { connection: "Upgrade", upgrade: "corral-tcp" };
    if (this.token) headers["x-corral-port-token"] = this.token;
    else if (this._client.token) headers.authorization = `Bearer ${this._client.token}`;
    const mod = u.protocol === "https:" ? https : http;
    return new Promise((resolve, reject) => {
      const req = mod.request(u, { method: "GET", headers });
      req.on("upgrade", (_res, socket, head) => {
        if (head.length) socket.unshift(head);
        resolve(socket);
      });
      req.on("response", (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (body += d));
        res.on("end", () => {
          let code = "", message = body.trim();
          try {
            const e = JSON.parse(body).error;
            code = e?.code ?? "";
            message = e?.message ?? message;
          } catch {
            // not JSON: keep the text
          }
          reject(res.statusCode && res.statusCode >= 400
            ? apiError(res.statusCode, code, message)
            : new CorralError(`tunnel to port ${this.port}: the daemon answered ${res.statusCode}, not an upgrade`));
        });
      });
      req.on("error", (err) => {
        reject(new ConnectionError(`cannot reach the Corral daemon at ${this._client.url}: ${describe(err)}`, { code: "unavailable", cause: err }));
      });
      req.end();
    });
  }
}
