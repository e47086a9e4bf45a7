import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Sandbox, CorralError, NotFoundError, InvalidArgumentError, ConnectionError, AuthenticationError,
} from "../src/index.js";
import { skip, newSandbox } from "../test-helpers.mjs";

test("a dead daemon is a ConnectionError, at once", async () => {
  const started = Date.now();
  await assert.rejects(Sandbox.list({ url: "http://127.0.0.1:1", token: "x" }), (err) => {
    assert.ok(err instanceof ConnectionError && err instanceof CorralError, String(err));
    assert.match(err.message, /cannot reach the Corral daemon at http:\/\/127\.0\.0\.1:1/);
    return true;
  });
  assert.ok(Date.now() - started < 30_000);
});

test("a bad URL is an InvalidArgumentError", async () => {
  await assert.rejects(Sandbox.list({ url: "ftp://x" }), InvalidArgumentError);
});

test("an unknown sandbox is a NotFoundError with the API's message", { skip }, async () => {
  await assert.rejects(Sandbox.fromId("sb-doesnotexist"), (err) => {
    assert.ok(err instanceof NotFoundError, String(err));
    assert.equal(err.status, 404);
    assert.equal(err.code, "not_found");
    assert.ok(err.message.length > 0);
    return true;
  });
});

test("a bad argument is an InvalidArgumentError naming the field", { skip }, async () => {
  await assert.rejects(Sandbox.create({ memory: -5 }), (err) => {
    assert.ok(err instanceof InvalidArgumentError, String(err));
    assert.equal(err.status, 400);
    assert.match(err.message, /memory/);
    return true;
  });
  // A wrong type reaches the daemon as JSON and is refused there.
  await assert.rejects(Sandbox.create({ cpu: "lots" }), InvalidArgumentError);
  await assert.rejects(Sandbox.create({ runtime: "nope" }), (err) => err instanceof InvalidArgumentError && /runtime/.test(err.message));
});

test("a wrong token is an AuthenticationError", { skip }, async () => {
  await assert.rejects(Sandbox.list({ token: "wrong" }), AuthenticationError);
});

test("exec refuses args that are not strings, before any call", { skip }, async (t) => {
  const sb = await newSandbox(t);
  await assert.rejects(sb.exec("echo hi"), InvalidArgumentError);
  await assert.rejects(sb.exec(["echo", 1]), InvalidArgumentError);
  await assert.rejects(sb.files.write("/tmp/x", 42), InvalidArgumentError);
  await assert.rejects(sb.files.readText("/no/such/file"), NotFoundError);
});
