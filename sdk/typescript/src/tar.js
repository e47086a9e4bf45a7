// A deterministic tar of a local file or directory, for an Image's copy
// steps: the layer's sha256 is the step's cache key, so the same names,
// modes, symlinks and contents must always give the same bytes (the rules
// of the CLI's internal/image/dirtar with Normalize, in short: entries at
// dst, parents of dst first as 0755 directories, a lexical walk that never
// follows a symlink, owner 0:0, one fixed time, no extended attributes).
import { createReadStream } from "node:fs";
import { lstat, readdir, readlink } from "node:fs/promises";
import { basename, join } from "node:path";
import { posix } from "node:path";
import { InvalidArgumentError } from "./errors.js";

/** The modification time of every entry (dirtar's NormalTime). */
const NORMAL_TIME = Date.UTC(2000, 0, 1) / 1000;
const BLOCK = 512;

/**
 * The tar's chunks, in order; skipped names (sockets, FIFOs, devices)
 * are pushed to opts.skipped.
 * @param {string} src a local file or directory (not a symlink)
 * @param {string} dst an absolute path in the image; a file lands at dst, or dst/<name> when dst ends in "/"
 * @param {{skipped?: string[]}} [opts]
 * @returns {AsyncGenerator<Uint8Array>}
 */
export async function* tarTree(src, dst, opts = {}) {
  const name = cleanDst(dst);
  const st = await lstat(src).catch((err) => {
    throw new InvalidArgumentError(`addLocalDir: ${src}: ${err.code ?? err.message}`, { code: "invalid_argument" });
  });
  if (st.isSymbolicLink()) {
    throw new InvalidArgumentError(`addLocalDir: ${src} is a symlink; name its target instead`, { code: "invalid_argument" });
  }
  let target = name;
  if (st.isFile() && dst.endsWith("/")) target = posix.join(name, basename(src));
  // Every parent of the target first, so that extraction invents none.
  const parts = target.split("/").filter(Boolean);
  for (let i = 1; i < parts.length; i++) {
    yield header({ name: parts.slice(0, i).join("/") + "/", type: "5", mode: 0o755 });
  }
  if (st.isDirectory()) {
    yield* tree(src, target, st, opts.skipped ?? []);
  } else if (st.isFile()) {
    yield* file(src, target, st);
  } else {
    throw new InvalidArgumentError(`addLocalDir: ${src} is not a regular file or a directory`, { code: "invalid_argument" });
  }
  yield new Uint8Array(2 * BLOCK);
}

/**
 * @param {string} dir
 * @param {string} name "" for the root
 * @param {import("node:fs").Stats} st
 * @param {string[]} skipped
 * @returns {AsyncGenerator<Uint8Array>}
 */
async function* tree(dir, name, st, skipped) {
  if (name !== "") yield header({ name: name + "/", type: "5", mode: st.mode });
  const names = (await readdir(dir)).sort(byBytes);
  for (const n of names) {
    const p = join(dir, n);
    const child = name === "" ? n : `${name}/${n}`;
    const cst = await lstat(p);
    if (cst.isDirectory()) yield* tree(p, child, cst, skipped);
    else if (cst.isFile()) yield* file(p, child, cst);
    else if (cst.isSymbolicLink()) yield header({ name: child, type: "2", mode: 0o777, linkname: await readlink(p) });
    else skipped.push(p);
  }
}

/**
 * @param {string} p
 * @param {string} name
 * @param {import("node:fs").Stats} st
 */
async function* file(p, name, st) {
  yield header({ name, type: "0", mode: st.mode, size: st.size });
  let n = 0;
  for await (const chunk of createReadStream(p)) {
    n += chunk.length;
    if (n > st.size) throw new InvalidArgumentError(`addLocalDir: ${p} grew while it was read`, { code: "invalid_argument" });
    yield chunk;
  }
  if (n !== st.size) throw new InvalidArgumentError(`addLocalDir: ${p} shrank while it was read`, { code: "invalid_argument" });
  if (n % BLOCK) yield new Uint8Array(BLOCK - (n % BLOCK));
}

/** @param {string} a @param {string} b */
function byBytes(a, b) {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/**
 * The entry name of dst: absolute, cleaned, without the leading "/".
 * @param {string} dst
 */
export function cleanDst(dst) {
  if (typeof dst !== "string" || !dst.startsWith("/") || dst.includes("\0")) {
    throw new InvalidArgumentError(`addLocalDir: remote path ${JSON.stringify(dst)} must be an absolute path`, { code: "invalid_argument" });
  }
  return posix.normalize(dst).replace(/^\/+/, "").replace(/\/+$/, "");
}

/**
 * One entry's header block (a PAX record first when a name is too long
 * for USTAR's fields).
 * @param {{name: string, type: string, mode: number, size?: number, linkname?: string}} e
 * @returns {Uint8Array}
 */
export function header(e) {
  const name = Buffer.from(e.name);
  const link = Buffer.from(e.linkname ?? "");
  /** @type {string[]} */
  const pax = [];
  if (name.length > 100) pax.push(paxRecord("path", e.name));
  if (link.length > 100) pax.push(paxRecord("linkpath", e.linkname ?? ""));
  const block = ustar({ name: name.subarray(0, 100), type: e.type, mode: e.mode & 0o7777, size: e.size ?? 0, link: link.subarray(0, 100) });
  if (!pax.length) return block;
  const body = Buffer.from(pax.join(""));
  const padded = Buffer.alloc(Math.ceil(body.length / BLOCK) * BLOCK);
  body.copy(padded);
  const ph = ustar({ name: Buffer.from("PaxHeaders/" + basename(e.name)).subarray(0, 100), type: "x", mode: 0o644, size: body.length, link: Buffer.alloc(0) });
  return Buffer.concat([ph, padded, block]);
}

/** A PAX record: "<len> key=value\n", len counting itself. @param {string} k @param {string} v */
function paxRecord(k, v) {
  const rest = ` ${k}=${v}\n`;
  const restLen = Buffer.byteLength(rest);
  let n = restLen + 1;
  while (n !== restLen + String(n).length) n = restLen + String(n).length;
  return `${n}${rest}`;
}

/** @param {{name: Buffer, type: string, mode: number, size: number, link: Buffer}} h */
function ustar(h) {
  const b = Buffer.alloc(BLOCK);
  h.name.copy(b, 0);
  octal(b, 100, 8, h.mode);
  octal(b, 108, 8, 0); // uid
  octal(b, 116, 8, 0); // gid
  octal(b, 124, 12, h.size);
  octal(b, 136, 12, NORMAL_TIME);
  b.fill(0x20, 148, 156); // the checksum counts its own field as spaces
  b.write(h.type, 156, "latin1");
  h.link.copy(b, 157);
  b.write("ustar\u000000", 257, "latin1");
  let sum = 0;
  for (const x of b) sum += x;
  b.write(sum.toString(8).padStart(6, "0") + "\u0000 ", 148, "latin1");
  return b;
}

/** @param {Buffer} b @param {number} off @param {number} len @param {number} v */
function octal(b, off, len, v) {
  const s = Math.floor(v).toString(8);
  if (s.length > len - 1) throw new InvalidArgumentError(`addLocalDir: a value too large for a tar header (${v})`, { code: "invalid_argument" });
  b.write(s.padStart(len - 1, "0") + "\u0000", off, "latin1");
}
