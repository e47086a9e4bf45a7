import { test } from "node:test";
import assert from "node:assert/strict";
import { skip, newSandbox } from "../test-helpers.mjs";

test("stdout and stderr stream by line; exit code", { skip }, async (t) => {
  const sb = await newSandbox(t);
  const p = await sb.exec(["sh", "-c", "echo one; echo two >&2; printf 'three\\nfour'; exit 3"]);
  const [out, err] = await Promise.all([collect(p.stdout), collect(p.stderr)]);
  assert.deepEqual(out, ["one", "three", "four"]);
  assert.deepEqual(err, ["two"]);
  assert.equal(await p.wait(), 3);
  assert.equal(p.returncode, 3);
});

test("output is seen before the process ends", { skip }, async (t) => {
  const sb = await newSandbox(t);
  await sb.files.write("/tmp/gate", "");
  // It prints, then waits until the test removes the gate: the line must
  // arrive while the process is still running.
  const p = await sb.exec(["sh", "-c", "echo ready; while [ -e /tmp/gate ]; do sleep 0.1; done; echo done"]);
  const it = p.stdout[Symbol.asyncIterator]();
  assert.deepEqual(await it.next(), { value: "ready", done: false });
  assert.equal(p.returncode, null);
  await sb.files.remove("/tmp/gate");
  assert.deepEqual(await it.next(), { value: "done", done: false });
  assert.equal(await p.wait(), 0);
});

test("stdin: writes in order, then end", { skip }, async (t) => {
  const sb = await newSandbox(t);
  const p = await sb.exec(["sh", "-c", "read a; echo got:$a; cat | wc -c"]);
  await p.stdin.write("first\n");
  const it = p.stdout[Symbol.asyncIterator]();
  assert.equal((await it.next()).value, "got:first");
  await p.stdin.write(new Uint8Array([65, 66, 67]));
  await p.stdin.write("de");
  await p.stdin.end();
  assert.equal((await it.next()).value.trim(), "5");
  assert.equal(await p.wait(), 0);
});

test("a PTY: a terminal, resize", { skip }, async (t) => {
  const sb = await newSandbox(t);
  const p = await sb.exec(["sh", "-c", "tty >/dev/null && echo isatty; read x; stty size"], { pty: { cols: 100, rows: 30 } });
  const it = p.stdout[Symbol.asyncIterator]();
  assert.equal((await it.next()).value, "isatty");
  await p.resize(120, 40);
  await p.stdin.write("go\n");
  const rest = [];
  for (let r = await it.next(); !r.done; r = await it.next()) rest.push(r.value);
  assert.ok(rest.includes("40 120"), JSON.stringify(rest));
  assert.equal(await p.wait(), 0);
});

test("workdir, env, user, timeout, kill", { skip }, async (t) => {
  const sb = await newSandbox(t);
  const p = await sb.exec(["sh", "-c", "pwd; echo $X; id -un"], { workdir: "/usr", env: { X: "y" }, user: "nobody" });
  assert.equal(await p.stdout.readText(), "/usr\ny\nnobody\n");

  const slow = await sb.exec(["sleep", "600"], { timeout: 1 });
  await slow.wait();
  assert.equal(slow.exit.timedOut, true);

  const k = await sb.exec(["sleep", "600"]);
  await k.kill();
  assert.notEqual(await k.wait(), 0);
  assert.match(k.exit.signal ?? "", /KILL|9/);
});

async function collect(stream) {
  const out = [];
  for await (const line of stream) out.push(line);
  return out;
}
