// FileWatch: a directory's changes in a sandbox, over the daemon's NDJSON
// GET /files/watch, as an async iterable.
import { CorralError } from "./errors.js";
import { ndjson } from "./ndjson.js";

/**
 * A watch of one directory. Iterate it (for await) for events; keepalives
 * are dropped, and iteration ends after the `end` event, on close(), or
 * when a loop breaks out (which closes it). `ready` resolves once the
 * daemon set the watch up (every change after it is reported) and
 * rejects with the error of a watch that could not start.
 */
export class FileWatch {
  /**
   * @param {import("./client.js").Client} client
   * @param {string} url the watch's path under the base URL
   * @param {Record<string, any>} query
   */
  constructor(client, url, query) {
    this._abort = new AbortController();
    /** The watched directory (as the daemon resolved it, once ready). @type {string} */
    this.path = query.path;
    /** @type {AsyncGenerator<any> | null} */
    this._events = null;
    this._used = false;
    /** Resolves once the watch is set up. @type {Promise<void>} */
    this.ready = this._start(client, url, query);
    this.ready.catch(() => {}); // reported by iteration too
  }

  /**
   * @param {import("./client.js").Client} client
   * @param {string} url
   * @param {Record<string, any>} query
   */
  async _start(client, url, query) {
    const resp = await client.request("GET", url, { query, signal: this._abort.signal });
    this._events = ndjson(resp, "the watch stream");
    const first = await this._events.next();
    if (first.done || first.value?.type !== "start") {
      this.close();
      const why = first.done ? "it ended" : first.value?.error || JSON.stringify(first.value);
      throw new CorralError(`the watch stream began without a start event: ${why}`, { code: "unavailable" });
    }
    if (first.value.path) this.path = first.value.path;
  }

  /** Stops the watch (idempotent). */
  close() {
    this._abort.abort();
  }

  /** @returns {AsyncGenerator<import("../index.js").WatchEvent>} */
  async *[Symbol.asyncIterator]() {
    if (this._used) throw new CorralError("a FileWatch is iterated once", { code: "failed_precondition" });
    this._used = true;
    try {
      await this.ready;
      const events = /** @type {AsyncGenerator<any>} */ (this._events);
      for await (const ev of events) {
        if (ev.type === "keepalive") continue;
        yield ev;
        if (ev.type === "end") return;
      }
    } finally {
      this.close();
    }
  }
}
