// ContainerProcess: a process started by Sandbox.exec, spoken over the
// daemon's NDJSON exec stream (start, stdout/stderr/pty, end), its stdin
// POSTs and its signal call.
import { ConnectionError, CorralError } from "./errors.js";
import { describe, enc } from "./client.js";
import { OutputStream } from "./stream.js";

/**
 * The end of a process, as the daemon reports it.
 * @typedef {{exitCode: number, signal?: string, timedOut: boolean, oomKilled: boolean, error?: string}} ExitInfo
 */

export class ContainerProcess {
  /**
   * @param {import("./client.js").Client} client
   * @param {string} sandboxId
   * @param {Response} resp the exec stream
   * @param {AbortController} abort
   */
  constructor(client, sandboxId, resp, abort) {
    this._client = client;
    this._sandboxId = sandboxId;
    this._abort = abort;
    /** Standard output (a PTY's output too). */
    this.stdout = new OutputStream();
    /** Standard error (empty with a PTY). */
    this.stderr = new OutputStream();
    /** The exit code once the process ended, else null. @type {number | null} */
    this.returncode = null;
    /** How it ended, once it did. @type {ExitInfo | null} */
    this.exit = null;
    /** The process id inside the sandbox (after start). @type {number} */
    this.pid = 0;
    this.stdin = new StdinWriter(this);
    /** @type {Promise<void>} */
    this._started = new Promise((res, rej) => ((this._startOk = res), (this._startFail = rej)));
    this._started.catch(() => {}); // a stream that breaks first rejects it; wait() reports that
    this._ended = this._pump(resp);
    this._ended.catch(() => {});
  }

  /** @param {Response} resp */
  async _pump(resp) {
    const reader = /** @type {ReadableStream<Uint8Array>} */ (resp.body).getReader();
    const dec = new TextDecoder();
    let buf = "";
    try {
      for (;;) {
        let r;
        try {
          r = await reader.read();
        } catch (err) {
          throw new ConnectionError(`the exec stream broke: ${describe(err)}`, { code: "unavailable", cause: err });
        }
        if (r.done) break;
        buf += dec.decode(r.value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.trim() && this._event(JSON.parse(line))) return;
        }
      }
      throw new ConnectionError("the exec stream ended before the process did", { code: "unavailable" });
    } catch (err) {
      const e = err instanceof CorralError ? err : new CorralError(describe(err), { cause: err });
      this.stdout._end(e);
      this.stderr._end(e);
      this._startFail(e);
      throw e;
    }
  }

  /**
   * Handles one event; true at the end.
   * @param {any} ev
   */
  _event(ev) {
    switch (ev.type) {
      case "start":
        this.pid = ev.pid;
        this._startOk();
        return false;
      case "stdout":
      case "pty":
        this.stdout._push(Buffer.from(ev.data ?? "", "base64"));
        return false;
      case "stderr":
        this.stderr._push(Buffer.from(ev.data ?? "", "base64"));
        return false;
      case "end":
        this.exit = {
          exitCode: ev.exit_code ?? 0,
          signal: ev.signal || undefined,
          timedOut: !!ev.timed_out,
          oomKilled: !!ev.oom_killed,
          error: ev.error || undefined,
        };
        this.returncode = this.exit.exitCode;
        this._startOk();
        this.stdout._end();
        this.stderr._end();
        return true;
      default:
        return false;
    }
  }

  /** Waits for the end; returns the exit code. */
  async wait() {
    await this._ended;
    return /** @type {number} */ (this.returncode);
  }

  /** The exit code if it ended, else null (never waits). */
  poll() {
    return this.returncode;
  }

  /**
   * Sends a signal to the process's group (default KILL).
   * @param {string} [signal]
   */
  async kill(signal = "KILL") {
    await this._started;
    if (this.returncode !== null) return;
    await this._client.json("POST", this._path("/signal"), { json: { signal } });
  }

  /**
   * Resizes a PTY process's terminal.
   * @param {number} cols
   * @param {number} rows
   */
  async resize(cols, rows) {
    await this._started;
    await this._client.json("POST", this._path("/resize"), { json: { cols, rows } });
  }

  /** @param {string} tail */
  _path(tail) {
    return `/v1/sandboxes/${enc(this._sandboxId)}/processes/${this.pid}${tail}`;
  }
}

/** A process's standard input: writes go in order; end() closes it. */
export class StdinWriter {
  /** @param {ContainerProcess} proc */
  constructor(proc) {
    this._proc = proc;
    /** @type {Promise<void>} */
    this._queue = Promise.resolve();
  }

  /**
   * Writes data (a string is UTF-8); resolves once the daemon took it.
   * @param {string | Uint8Array} data
   */
  write(data) {
    const body = typeof data === "string" ? Buffer.from(data) : data;
    return this._send(body, false);
  }

  /** Closes stdin (the process reads EOF), after what was written. */
  end() {
    return this._send(new Uint8Array(0), true);
  }

  /**
   * @param {Uint8Array} body
   * @param {boolean} close
   */
  _send(body, close) {
    const p = this._queue.then(async () => {
      const proc = this._proc;
      await proc._started;
      await proc._client.json("POST", proc._path("/stdin"), { query: close ? { close: true } : undefined, body });
    });
    this._queue = p.catch(() => {});
    return p;
  }
}
