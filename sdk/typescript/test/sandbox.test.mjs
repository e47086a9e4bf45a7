import { test } from "node:test";
import assert from "node:assert/strict";
import { Sandbox, CorralError } from "../src/index.js";
import { skip, newSandbox } from "../test-helpers.mjs";

test("create, fromId, fromName, list by tags, setTags, setTimeout, terminate", { skip }, async (t) => {
  const name = `ts-${process.pid}-${Date.now()}`;
  const sb = await newSandbox(t, {
    name, cpu: [0.5, 1], memory: [128, 256], workdir: "/tmp", env: { GREETING: "hello" },
    tags: { test: "ts-sdk", case: name }, blockNetwork: true,
  });
  assert.match(sb.sandboxId, /\S/);
  assert.equal(sb.info.state, "running");
  assert.equal(sb.info.runtime, "gvisor");
  assert.equal(sb.info.memory_limit_mb, 256);
  assert.equal(sb.info.network.block_network, true);

  assert.equal((await Sandbox.fromId(sb.sandboxId)).sandboxId, sb.sandboxId);
  assert.equal((await Sandbox.fromName(name)).sandboxId, sb.sandboxId);
  const found = await Sandbox.list({ tags: { case: name } });
  assert.deepEqual(found.map((s) => s.sandboxId), [sb.sandboxId]);

  const p = await sb.exec(["sh", "-c", "echo $GREETING; pwd"]);
  assert.equal(await p.stdout.readText(), "hello\n/tmp\n");

  await sb.setTags({ extra: "1", case: null });
  assert.equal(sb.info.tags.extra, "1");
  assert.equal(sb.info.tags.case, undefined);
  assert.equal((await Sandbox.list({ tags: { case: name } })).length, 0);

  const before = Date.parse(sb.info.expires_at);
  await sb.setTimeout(1200);
  assert.ok(Date.parse(sb.info.expires_at) > before);

  assert.equal(await sb.poll(), null);
  await sb.terminate();
  assert.ok(sb.info.ended_at);
  assert.equal((await sb.wait()).exit_code, 137);
  await assert.rejects(sb.exec(["true"]), (e) => e instanceof CorralError && e.status >= 400 && e.status < 500);
});

test("cmd is the sandbox's entrypoint; wait returns its exit code", { skip }, async (t) => {
  const sb = await newSandbox(t, { cmd: ["sh", "-c", "exit 7"] });
  const r = await sb.wait({ timeout: 120 });
  assert.equal(r.exit_code, 7);
  assert.equal(await sb.poll(), 7);
});

test("pause, resume, memory snapshot, a copy from it, fork", { skip }, async (t) => {
  const sb = await newSandbox(t);
  await sb.files.write("/root/state.txt", "kept");
  await sb.pause();
  assert.equal(sb.info.state, "paused");
  await sb.resume();
  assert.equal(sb.info.state, "running");
  assert.equal(await sb.files.readText("/root/state.txt"), "kept");

  const snap = await sb.snapshot({ name: `ts-snap-${process.pid}-${Date.now()}` });
  assert.match(snap.id, /^snap-/);
  // The copy's image, runtime and resources are the snapshot's.
  const copy = await Sandbox.create({ fromSnapshot: snap.name, tags: { test: "ts-sdk" } });
  t.after(() => copy.terminate().catch(() => {}));
  assert.notEqual(copy.sandboxId, sb.sandboxId);
  assert.equal(await copy.files.readText("/root/state.txt"), "kept");

  const forks = await sb.fork(2);
  t.after(() => Promise.all(forks.map((f) => f.terminate().catch(() => {}))));
  assert.equal(forks.length, 2);
  for (const f of forks) {
    assert.equal(f.info.tags["corral.forked_from"], sb.sandboxId);
    assert.equal(await f.files.readText("/root/state.txt"), "kept");
  }
});

test("a vm sandbox creates and runs a command", { skip: skip || (process.env.CORRAL_TS_VM ? false : "CORRAL_TS_VM unset") }, async (t) => {
  const sb = await newSandbox(t, { runtime: "vm", memory: 512 });
  assert.equal(sb.info.runtime, "vm");
  const p = await sb.exec(["uname", "-s"]);
  assert.equal((await p.stdout.readText()).trim(), "Linux");
  assert.equal(await p.wait(), 0);
});
