import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Volume, Secret, ConflictError, NotFoundError, InvalidArgumentError } from "../src/index.js";
import { skip, newSandbox } from "../test-helpers.mjs";

/** Runs sh -c script to its end; returns stdout and the exit code. */
async function sh(sb, script, opts = {}) {
  const p = await sb.exec(["sh", "-c", script], { stdin: false, ...opts });
  const out = await p.stdout.readText();
  return { out, code: await p.wait() };
}

test("a volume: host-side files, written in one sandbox, read-only in the next, removed", { skip }, async (t) => {
  const name = `ts-vol-${randomUUID().slice(0, 8)}`;
  const vol = await Volume.create(name, { sizeGiB: 1 });
  t.after(() => vol.remove({ force: true }).catch(() => {}));
  assert.equal(vol.sizeGiB, 1);
  assert.ok((await Volume.list()).some((v) => v.name === name));
  await vol.write("/seed.txt", "from the host");

  const writer = await newSandbox(t, { volumes: { "/data": vol } });
  assert.deepEqual(writer.info.volumes, [{ name, path: "/data" }]);
  assert.equal((await sh(writer, "cat /data/seed.txt; echo from the writer > /data/out.txt")).out, "from the host");
  await assert.rejects(vol.remove(), ConflictError);
  await writer.terminate();

  const reader = await newSandbox(t, { volumes: [vol.mount("/mnt/v", { readOnly: true })] });
  assert.equal((await sh(reader, "cat /mnt/v/out.txt")).out, "from the writer\n");
  assert.notEqual((await sh(reader, "echo no > /mnt/v/refused")).code, 0);
  await reader.terminate();

  assert.equal(await vol.readText("/out.txt"), "from the writer\n");
  const names = (await vol.list()).map((e) => e.name); // ext4 adds lost+found
  assert.ok(names.includes("out.txt") && names.includes("seed.txt"), names.join(","));
  await vol.remove();
  await assert.rejects(Volume.fromName(name), NotFoundError);
  await assert.rejects(Volume.create("a/b"), InvalidArgumentError);
});

test("a secret: env in the sandbox, never a value in a listing or the record", { skip }, async (t) => {
  const name = `ts-sec-${randomUUID().slice(0, 8)}`;
  const value = `v1-${randomUUID()}`;
  const sec = await Secret.create(name, { TS_TOKEN: value });
  t.after(() => sec.remove().catch(() => {}));
  assert.deepEqual(sec.keys, ["TS_TOKEN"]);
  const listed = await Secret.list();
  assert.deepEqual(listed.find((s) => s.name === name)?.keys, ["TS_TOKEN"]);
  assert.ok(!JSON.stringify(listed.map((s) => s.info)).includes(value));

  const sb = await newSandbox(t, { secrets: [sec] });
  assert.equal((await sh(sb, 'printf %s "$TS_TOKEN"')).out, value);
  assert.deepEqual(sb.info.secrets, [name]);
  assert.ok(!JSON.stringify(await sb.refresh()).includes(value));
  const rotated = `v2-${randomUUID()}`;
  await sec.rotate({ TS_TOKEN: rotated });
  assert.equal((await sh(sb, 'printf %s "$TS_TOKEN"', { secrets: [name] })).out, rotated);

  await assert.rejects(Secret.create(`${name}-bad`, { K: 12345 }), (e) => e instanceof InvalidArgumentError && !e.message.includes("12345"));
  await assert.rejects(newSandbox(t, { secrets: ["ts-no-such-secret"] }), NotFoundError);
  await sec.remove();
  await assert.rejects(Secret.fromName(name), NotFoundError);
});
