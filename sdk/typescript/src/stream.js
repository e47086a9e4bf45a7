// OutputStream: one output of a process (stdout, stderr, or a PTY's), fed
// by the exec event stream as chunks arrive and read once, as lines, text
// chunks or bytes.

/** An output of a running process: async-iterable by line as it arrives. */
export class OutputStream {
  constructor() {
    /** @type {Uint8Array[]} */
    this._chunks = [];
    this._done = false;
    /** @type {Error | null} */
    this._error = null;
    /** @type {(() => void) | null} */
    this._wake = null;
  }

  /** @param {Uint8Array} chunk */
  _push(chunk) {
    this._chunks.push(chunk);
    this._notify();
  }

  /** @param {Error | null} [err] */
  _end(err) {
    if (this._done) return;
    this._done = true;
    this._error = err ?? null;
    this._notify();
  }

  _notify() {
    const w = this._wake;
    this._wake = null;
    if (w) w();
  }

  /** Bytes as they arrive. @returns {AsyncGenerator<Uint8Array>} */
  async *chunks() {
    for (;;) {
      if (this._chunks.length) {
        yield /** @type {Uint8Array} */ (this._chunks.shift());
        continue;
      }
      if (this._done) {
        if (this._error) throw this._error;
        return;
      }
      await new Promise((r) => (this._wake = () => r(undefined)));
    }
  }

  /** Text (UTF-8) as it arrives, in the pieces it came in. @returns {AsyncGenerator<string>} */
  async *text() {
    const dec = new TextDecoder();
    for await (const c of this.chunks()) {
      const s = dec.decode(c, { stream: true });
      if (s) yield s;
    }
    const tail = dec.decode();
    if (tail) yield tail;
  }

  /** Lines without their "\n" (a "\r\n" loses both), each once it is whole. @returns {AsyncGenerator<string>} */
  async *lines() {
    let buf = "";
    for await (const s of this.text()) {
      buf += s;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        yield buf.slice(0, i).replace(/\r$/, "");
        buf = buf.slice(i + 1);
      }
    }
    if (buf) yield buf;
  }

  /** Everything until the output ends, as text. */
  async readText() {
    let s = "";
    for await (const t of this.text()) s += t;
    return s;
  }

  /** Everything until the output ends, as bytes. */
  async readBytes() {
    /** @type {Uint8Array[]} */
    const parts = [];
    for await (const c of this.chunks()) parts.push(c);
    return Buffer.concat(parts);
  }

  [Symbol.asyncIterator]() {
    return this.lines();
  }
}
