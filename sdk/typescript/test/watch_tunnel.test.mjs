import { test } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError, NotFoundError, AuthenticationError } from "../src/index.js";
import { skip, newSandbox } from "../test-helpers.mjs";

test("files.watch: changes as they happen, recursive, closing, end, errors", { skip, timeout: 120_000 }, async (t) => {
  const sb = await newSandbox(t);
  await sb.files.mkdir("/tmp/w");
  const w = sb.files.watch("/tmp/w", { recursive: true });
  await w.ready;
  assert.equal(w.path, "/tmp/w");
  const seen = [];
  const done = (async () => {
    for await (const ev of w) {
      seen.push(`${ev.type} ${ev.name}`);
      if (ev.type === "end") break;
    }
  })();
  await sb.files.write("/tmp/w/a.txt", "a");
  await sb.files.mkdir("/tmp/w/sub");
  await until(() => seen.includes("create sub"));
  await sb.files.write("/tmp/w/sub/b.txt", "b"); // in a directory that appeared after the start
  await until(() => seen.includes("create sub/b.txt"));
  await sb.files.remove("/tmp/w/a.txt");
  await until(() => seen.includes("remove a.txt"));
  assert.ok(seen.includes("create a.txt"), seen.join(", "));
  // The watched directory goes: the watch ends with an end event.
  await sb.files.remove("/tmp/w");
  await done;
  assert.equal(seen.at(-1).split(" ")[0], "end", seen.join(", "));

  // close() ends a loop that is waiting; breaking out closes too.
  await sb.files.mkdir("/tmp/v");
  const v = sb.files.watch("/tmp/v");
  const ended = (async () => { for await (const _ of v) void _; })();
  await v.ready;
  v.close();
  await ended;
  const b = sb.files.watch("/tmp/v");
  await b.ready;
  await sb.files.write("/tmp/v/x", "1");
  for await (const ev of b) if (ev.type === "create") break;

  await assert.rejects(sb.files.watch("/no/such/dir").ready, NotFoundError);
  await assert.rejects(sb.files.watch("/tmp/v/x").ready, InvalidArgumentError);
  assert.throws(() => sb.files.watch(""), InvalidArgumentError);
});

test("tunnels: HTTP through the daemon to a server in the sandbox, raw TCP, tokens", { skip, timeout: 120_000 }, async (t) => {
  const sb = await newSandbox(t, { expose: [8000, { port: 8001, public: true }] });
  await sb.files.write("/srv/www/hello.txt", "hello through the tunnel\n");
  for (const port of [8000, 8001]) {
    await sb.exec(["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", "/srv/www"]);
  }
  const tunnels = await sb.tunnels();
  assert.deepEqual(Object.keys(tunnels).sort(), ["8000", "8001"]);
  const tun = await sb.tunnel(8000);
  assert.equal(tun.port, 8000);
  assert.equal(tun.public, false);
  assert.ok(tun.url.startsWith(process.env.CORRAL_URL) && tun.url.includes("corral_token="), tun.url);

  // The server starts in the background: wait until it answers.
  let resp;
  await until(async () => (resp = await fetch(tun.urlOf("/hello.txt"))).status === 200);
  assert.equal(await resp.text(), "hello through the tunnel\n");
  assert.equal(await (await tun.fetch("/hello.txt")).text(), "hello through the tunnel\n");
  assert.equal((await fetch(tun.baseUrl + "hello.txt")).status, 401); // no token
  const pub = tunnels[8001];
  assert.equal(pub.url, pub.baseUrl);
  await until(async () => (await fetch(pub.urlOf("hello.txt"))).status === 200);

  // A raw TCP stream carries the port's own protocol.
  const sock = await tun.connect();
  sock.write("GET /hello.txt HTTP/1.0\r\nHost: x\r\n\r\n");
  let raw = "";
  for await (const c of sock) {
    raw += c;
    if (raw.endsWith("hello through the tunnel\n")) break; // breaking destroys the socket
  }
  assert.match(raw, /^HTTP\/1\.0 200 OK\r\n[\s\S]*\r\n\r\nhello through the tunnel\n$/);

  await assert.rejects(sb.tunnel(9999), (e) => e instanceof NotFoundError && /port 9999 .* not exposed/.test(e.message));
  await assert.rejects(sb.tunnel(0), InvalidArgumentError);
  const wrong = Object.assign(Object.create(Object.getPrototypeOf(tun)), tun, { token: "wrong" });
  await assert.rejects(wrong.connect(), AuthenticationError);
});

/** Waits until cond() is true (polled every 50 ms, at most 60 s). */
async function until(cond) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if (await cond()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${cond}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
