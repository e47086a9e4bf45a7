import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NotFoundError } from "../src/index.js";
import { skip, newSandbox } from "../test-helpers.mjs";

test("write and read strings and bytes; list, mkdir, stat, rename, remove", { skip, timeout: 120_000 }, async (t) => {
  const sb = await newSandbox(t);
  const fs = sb.files;
  const e = await fs.write("/work/dir/a.txt", "héllo\n", { mode: 0o600 });
  assert.equal(e.size, Buffer.byteLength("héllo\n"));
  assert.equal(await fs.readText("/work/dir/a.txt"), "héllo\n");
  assert.equal((await fs.stat("/work/dir/a.txt")).permissions.slice(-9), "rw-------");

  const bytes = new Uint8Array([0, 1, 2, 255]);
  await fs.write("/work/dir/b.bin", bytes);
  assert.deepEqual(await fs.read("/work/dir/b.bin"), bytes);

  await fs.mkdir("/work/dir/sub/deeper");
  assert.equal((await fs.stat("/work/dir/sub/deeper")).type, "dir");
  const names = (await fs.list("/work/dir")).map((x) => x.name).sort();
  assert.deepEqual(names, ["a.txt", "b.bin", "sub"]);
  assert.ok((await fs.list("/work/dir", { depth: 3 })).some((x) => x.path === "/work/dir/sub/deeper"));

  await fs.rename("/work/dir/a.txt", "/work/dir/c.txt");
  assert.equal(await fs.exists("/work/dir/a.txt"), false);
  assert.equal(await fs.exists("/work/dir/c.txt"), true);
  await fs.remove("/work/dir");
  assert.equal(await fs.exists("/work/dir"), false);

  // Local files in and out, streamed.
  const local = await mkdtemp(join(tmpdir(), "corral-copy-"));
  t.after(() => rm(local, { recursive: true, force: true }));
  await writeFile(join(local, "in.bin"), Buffer.from([1, 2, 3, 0, 250]));
  assert.equal((await fs.copyFromLocal(join(local, "in.bin"), "/work/copied.bin", { mode: 0o640 })).size, 5);
  await fs.copyToLocal("/work/copied.bin", join(local, "out.bin"));
  assert.deepEqual(await readFile(join(local, "out.bin")), Buffer.from([1, 2, 3, 0, 250]));
  await assert.rejects(fs.copyToLocal("/work/missing", join(local, "never")), NotFoundError);
  assert.deepEqual((await readdir(local)).sort(), ["in.bin", "out.bin"]); // no partial file left

  // sb.open: write streamed and replaced on close, append, read.
  const w = await sb.open("/work/log.txt", "w");
  await w.write("one\n");
  await w.write(Buffer.from("two\n"));
  assert.equal(await fs.exists("/work/log.txt"), false); // not before close
  assert.equal((await w.close()).size, 8);
  const a = await sb.open("/work/log.txt", "a");
  await a.write("three\n");
  await a.close();
  const r = await sb.open("/work/log.txt", "rb");
  assert.equal(await r.readText(), "one\ntwo\nthree\n");
  await r.close();
  const fresh = await sb.open("/work/new.txt", "a"); // appending to nothing creates it
  await fresh.write("x");
  await fresh.close();
  assert.equal(await fs.readText("/work/new.txt"), "x");
  await assert.rejects(sb.open("/work/missing.txt"), NotFoundError);
  await assert.rejects(sb.open("/work/log.txt", "rw"), /mode "rw": want one of r, rb, w, wb, a, ab/);

  // A file the SDK wrote is what a process sees.
  await fs.write("/tmp/s.py", "print(6*7)\n");
  const p = await sb.exec(["python3", "/tmp/s.py"]);
  assert.equal((await p.stdout.readText()).trim(), "42");
});

test("a 100 MB file round trip, streamed both ways, byte-identical", { skip, timeout: 600_000 }, async (t) => {
  const sb = await newSandbox(t, { memory: 512 });
  const size = 100 * 1024 * 1024;
  const chunk = 1024 * 1024;
  const sent = createHash("sha256");
  // Generated as it is sent: never held whole.
  async function* source() {
    for (let i = 0; i < size / chunk; i++) {
      const b = Buffer.alloc(chunk);
      for (let j = 0; j < chunk; j += 4) b.writeUInt32LE(((i * chunk + j) ^ 0x9e3779b9) >>> 0, j);
      sent.update(b);
      yield b;
    }
  }
  const e = await sb.files.write("/tmp/big.bin", source());
  assert.equal(e.size, size);

  const p = await sb.exec(["sha256sum", "/tmp/big.bin"]);
  const inside = (await p.stdout.readText()).split(" ")[0];
  const want = sent.digest("hex");
  assert.equal(inside, want);

  const got = createHash("sha256");
  let n = 0;
  for await (const c of await sb.files.readStream("/tmp/big.bin")) {
    got.update(c);
    n += c.length;
  }
  assert.equal(n, size);
  assert.equal(got.digest("hex"), want);
});
