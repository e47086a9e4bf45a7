// Reading the daemon's NDJSON streams (image builds, file watches) one
// object at a time, as each line arrives.
import { ConnectionError } from "./errors.js";
import { describe } from "./client.js";

/**
 * The objects of an NDJSON response body, as they arrive.
 * @param {Response} resp
 * @param {string} what names the stream in errors ("the build stream")
 * @returns {AsyncGenerator<any>}
 */
export async function* ndjson(resp, what) {
  const reader = /** @type {ReadableStream<Uint8Array>} */ (resp.body).getReader();
  const dec = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      let r;
      try {
        r = await reader.read();
      } catch (err) {
        if (/** @type {any} */ (err)?.name === "AbortError") return;
        throw new ConnectionError(`${what} broke: ${describe(err)}`, { code: "unavailable", cause: err });
      }
      if (r.done) break;
      buf += dec.decode(r.value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) yield JSON.parse(line);
      }
    }
    if (buf.trim()) yield JSON.parse(buf);
  } finally {
    reader.cancel().catch(() => {});
  }
}
