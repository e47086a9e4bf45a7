// The official TypeScript MCP client against `corral mcp`, over the
// transport MCP_TRANSPORT names: stdio (it spawns CORRAL_BIN mcp with
// CORRAL_URL and CORRAL_TOKEN) or http (MCP_HTTP_URL, a `corral mcp
// --http` the Go test started, with CORRAL_TOKEN as the bearer token).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const kind = process.env.MCP_TRANSPORT;
const token = process.env.CORRAL_TOKEN;
const slow = { timeout: 300_000 }; // a create may wait on an image

function transport(bearer) {
  if (kind === 'stdio') {
    return new StdioClientTransport({
      command: process.env.CORRAL_BIN,
      args: ['mcp', '--max-timeout', '30m'],
      env: { CORRAL_URL: process.env.CORRAL_URL, CORRAL_TOKEN: bearer, PATH: process.env.PATH },
      stderr: 'inherit',
    });
  }
  return new StreamableHTTPClientTransport(new URL(process.env.MCP_HTTP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
  });
}

async function connect(bearer = token) {
  const client = new Client({ name: 'corral-e2e', version: '1.0.0' });
  await client.connect(transport(bearer));
  return client;
}

// call runs a tool that must succeed and returns its structured result.
async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args }, undefined, slow);
  assert.ok(!res.isError, `${name} ${JSON.stringify(args)}: ${JSON.stringify(res.content)}`);
  assert.ok(res.structuredContent, `${name}: no structured result`);
  return res.structuredContent;
}

// fails runs a tool that must fail as a tool error and returns its text.
async function fails(client, name, args) {
  const res = await client.callTool({ name, arguments: args }, undefined, slow);
  assert.equal(res.isError, true, `${name} ${JSON.stringify(args)} succeeded: ${JSON.stringify(res.content)}`);
  return res.content.map((c) => c.text).join('\n');
}

test(`corral mcp over ${kind}`, async (t) => {
  assert.ok(kind === 'stdio' || kind === 'http', `MCP_TRANSPORT=${kind}: want stdio or http`);
  const client = await connect();
  t.after(() => client.close());
  let id;

  await t.test('lists its tools with descriptions and schemas', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((x) => x.name).sort();
    assert.deepEqual(names, ['create_sandbox', 'fork', 'list_files', 'list_sandboxes', 'pause', 'read_file',
      'resume', 'run_command', 'snapshot', 'terminate', 'write_file']);
    for (const tool of tools) {
      assert.ok(tool.description.length > 20, `${tool.name}: description ${tool.description}`);
      assert.equal(tool.inputSchema.type, 'object', `${tool.name}: input schema`);
    }
    const run = tools.find((x) => x.name === 'run_command');
    assert.deepEqual(run.inputSchema.required, ['sandbox']);
  });

  await t.test('creates a sandbox tagged with its session', async () => {
    const sb = await call(client, 'create_sandbox', { runtime: 'gvisor', timeout: 600, tags: { suite: 'mcp' } });
    id = sb.id;
    assert.equal(sb.state, 'running');
    assert.ok(sb.tags.mcp, `tags ${JSON.stringify(sb.tags)}`);
    assert.equal(sb.tags.suite, 'mcp');
    const mine = await call(client, 'list_sandboxes', { session_only: true });
    assert.deepEqual(mine.sandboxes.map((s) => s.id), [id]);
    // Every server under test is bounded at 30m: corral mcp --max-timeout,
    // the daemon's /mcp by corral serve --mcp-max-timeout.
    assert.match(await fails(client, 'create_sandbox', { timeout: 7200 }), /at most 1800s/);
  });

  await t.test('runs python3 and gets 42', async () => {
    const argv = await call(client, 'run_command', { sandbox: id, argv: ['python3', '-c', 'print(6*7)'] });
    assert.equal(argv.exit_code, 0, JSON.stringify(argv));
    assert.equal(argv.stdout, '42\n');
    const sh = await call(client, 'run_command', { sandbox: id, command: "python3 -c 'print(6*7)'; echo err >&2; exit 3" });
    assert.deepEqual([sh.exit_code, sh.stdout, sh.stderr], [3, '42\n', 'err\n']);
  });

  await t.test('writes then reads a file', async () => {
    const text = 'hello from mcp\nπ ≈ 3.14\n';
    const w = await call(client, 'write_file', { sandbox: id, path: '/tmp/mcp/hello.txt', content: text });
    assert.equal(w.size, Buffer.byteLength(text));
    const r = await call(client, 'read_file', { sandbox: id, path: '/tmp/mcp/hello.txt' });
    assert.deepEqual([r.content, r.encoding], [text, 'utf-8']);
    const ls = await call(client, 'list_files', { sandbox: id, path: '/tmp/mcp' });
    assert.deepEqual(ls.entries.map((e) => e.path), ['/tmp/mcp/hello.txt']);
    const cat = await call(client, 'run_command', { sandbox: id, argv: ['cat', '/tmp/mcp/hello.txt'] });
    assert.equal(cat.stdout, text);
    const bin = await call(client, 'write_file', { sandbox: id, path: '/tmp/mcp/bin', content: Buffer.from([0, 255, 1]).toString('base64'), encoding: 'base64' });
    assert.equal(bin.size, 3);
    const rb = await call(client, 'read_file', { sandbox: id, path: '/tmp/mcp/bin' });
    assert.deepEqual([rb.encoding, rb.content], ['base64', 'AP8B']);
  });

  await t.test('a command that loops forever ends at its timeout', async () => {
    const res = await call(client, 'run_command', { sandbox: id, command: 'while :; do :; done', timeout: 3 });
    assert.equal(res.timed_out, true, JSON.stringify(res));
    assert.match(res.message, /timeout of 3s/);
    assert.notEqual(res.exit_code, 0);
  });

  await t.test('a huge output comes back bounded and marked', async () => {
    const res = await call(client, 'run_command', { sandbox: id, command: 'head -c 10000000 /dev/zero | tr "\\0" a; echo done >&2' });
    assert.equal(res.exit_code, 0);
    assert.equal(res.stdout_truncated, true);
    assert.equal(res.stdout_bytes, 10_000_000);
    assert.ok(res.stdout.length < 70_000, `stdout of ${res.stdout.length} chars`);
    assert.match(res.stdout, /^a{65536}\n\[output cut: 65536 of 10000000 bytes shown\]$/);
    assert.equal(res.stderr, 'done\n');
    assert.ok(!res.stderr_truncated);
  });

  await t.test('errors are tool errors', async () => {
    assert.match(await fails(client, 'run_command', { sandbox: 'no-such-sandbox', command: 'true' }), /not.found|no such|does not exist/i);
    assert.match(await fails(client, 'read_file', { sandbox: id, path: '/nonexistent/file' }), /not.found|no such|does not exist/i);
    assert.match(await fails(client, 'run_command', { sandbox: id }), /command or argv/);
    // The session carries on.
    assert.equal((await call(client, 'run_command', { sandbox: id, argv: ['true'] })).exit_code, 0);
  });

  await t.test('snapshots (memory and filesystem) and forks', async () => {
    await call(client, 'write_file', { sandbox: id, path: '/root/kept.txt', content: 'kept\n' });
    const mem = await call(client, 'snapshot', { sandbox: id, name: `mcp-${kind}-${process.pid}-${Date.now()}` });
    assert.equal(mem.kind, 'memory');
    assert.match(mem.id, /^snap-/);
    const tag = `mcp-test/${kind}:${process.pid}`;
    const fsnap = await call(client, 'snapshot', { sandbox: id, kind: 'filesystem', name: tag });
    assert.deepEqual([fsnap.kind, fsnap.image], ['filesystem', tag]);
    assert.match(await fails(client, 'snapshot', { sandbox: id, kind: 'disk' }), /want memory or filesystem/);

    // The image of its files starts a new sandbox that has the file.
    const fromImage = await call(client, 'create_sandbox', { image: tag, timeout: 300 });
    const cat = await call(client, 'run_command', { sandbox: fromImage.id, argv: ['cat', '/root/kept.txt'] });
    assert.equal(cat.stdout, 'kept\n');
    await call(client, 'terminate', { sandbox: fromImage.id });

    // A fork is a running copy: same files, a process that was running
    // in the original keeps running in the copy, tagged with the session.
    await call(client, 'run_command', { sandbox: id, command: 'setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > /root/sleeper.pid' });
    const forks = await call(client, 'fork', { sandbox: id, count: 1 });
    assert.equal(forks.sandboxes.length, 1);
    const f = forks.sandboxes[0];
    assert.notEqual(f.id, id);
    assert.equal(f.state, 'running');
    assert.equal(f.tags.mcp, (await call(client, 'list_sandboxes', { session_only: true })).sandboxes.find((s) => s.id === id).tags.mcp);
    const alive = await call(client, 'run_command', { sandbox: f.id, command: 'cat /root/kept.txt; kill -0 $(cat /root/sleeper.pid) && echo alive' });
    assert.equal(alive.stdout, 'kept\nalive\n');
    assert.match(await fails(client, 'fork', { sandbox: id, count: 101 }), /count 101: want 1 to 100/);
    await call(client, 'terminate', { sandbox: f.id });
  });

  await t.test('a sandbox with a volume and a secret', async () => {
    const sb = await call(client, 'create_sandbox', {
      timeout: 300, volumes: [{ name: process.env.MCP_VOLUME, path: '/data', read_only: true }], secrets: [process.env.MCP_SECRET],
    });
    try {
      assert.deepEqual(sb.volumes, [{ name: process.env.MCP_VOLUME, path: '/data', read_only: true }]);
      assert.deepEqual(sb.secrets, [process.env.MCP_SECRET]);
      assert.ok(!JSON.stringify(sb).includes(process.env.MCP_SECRET_VALUE), 'the sandbox record holds the value');
      const r = await call(client, 'run_command', { sandbox: sb.id, command: 'cat /data/seed.txt; printf %s "$MCP_TOKEN"; touch /data/x' });
      assert.equal(r.stdout, `from the volume\n${process.env.MCP_SECRET_VALUE}`);
      assert.notEqual(r.exit_code, 0, 'a read-only volume took a write');
    } finally {
      await call(client, 'terminate', { sandbox: sb.id });
    }
    assert.match(await fails(client, 'create_sandbox', { volumes: [{ name: 'mcp-no-such-volume', path: '/data' }] }), /mcp-no-such-volume/);
  });

  await t.test('pauses, resumes and terminates', async () => {
    assert.equal((await call(client, 'pause', { sandbox: id })).state, 'paused');
    assert.equal((await call(client, 'resume', { sandbox: id })).state, 'running');
    const end = await call(client, 'terminate', { sandbox: id });
    assert.notEqual(end.state, 'running');
    assert.match(await fails(client, 'run_command', { sandbox: id, command: 'true' }), /.+/);
  });

  if (kind === 'http') {
    await t.test('a bad token is refused with 401', async () => {
      await assert.rejects(connect('wrong-token'), (e) => e.code === 401 || /wrong API token/.test(String(e)));
      const res = await fetch(process.env.MCP_HTTP_URL, {
        method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      assert.equal(res.status, 401);
    });
  }
});
