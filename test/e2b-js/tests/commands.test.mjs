// Processes through envd with the official SDK, unchanged: commands.run
// with callbacks and exit codes, background commands (connect, list, kill,
// stdin) and a PTY. Also run in the SDK's debug mode (E2B_DEBUG=true),
// where the sandbox is the daemon's --envd-debug-sandbox.
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { CommandExitError, TimeoutError } from 'e2b'
import { cleanup, create, waitFor } from './setup.mjs'
import { debug } from './envd.mjs'

afterAll(cleanup)

describe('commands', () => {
  let sbx
  beforeAll(async () => {
    sbx = await create('base', { timeoutMs: 600_000 })
  })

  test('run streams stdout and stderr to callbacks and returns the result', async () => {
    const out = []
    const errs = []
    const res = await sbx.commands.run('echo one; echo two >&2; echo three; id -un; pwd', {
      onStdout: (d) => out.push(d),
      onStderr: (d) => errs.push(d),
    })
    expect(res.exitCode).toBe(0)
    expect(res.stdout).toBe('one\nthree\nuser\n/home/user\n')
    expect(res.stderr).toBe('two\n')
    expect(out.join('')).toBe(res.stdout)
    expect(errs.join('')).toBe('two\n')
  })

  test('run takes env, cwd and user', async () => {
    const res = await sbx.commands.run('echo "$GREETING $(pwd) $(id -un)"', {
      envs: { GREETING: 'hello' },
      cwd: '/tmp',
      user: 'root',
    })
    expect(res.stdout).toBe('hello /tmp root\n')
  })

  test('a non-zero exit is a CommandExitError with the output', async () => {
    const err = await sbx.commands.run('echo partial; echo bad >&2; exit 3').catch((e) => e)
    expect(err).toBeInstanceOf(CommandExitError)
    expect(err.exitCode).toBe(3)
    expect(err.stdout).toBe('partial\n')
    expect(err.stderr).toBe('bad\n')
  })

  test('a background command: list, connect, stdin, close stdin, wait', async () => {
    const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true })
    expect(h.pid).toBeGreaterThan(0)
    const listed = await sbx.commands.list()
    const mine = listed.find((p) => p.pid === h.pid)
    expect(mine).toBeTruthy()
    expect(mine.cmd).toBe('/bin/bash')
    await h.disconnect()
    const seen = []
    const again = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) })
    await sbx.commands.sendStdin(h.pid, 'hello stdin\n')
    await waitFor('stdin echoed', () => seen.join('').includes('hello stdin\n'), 30_000)
    await again.closeStdin()
    const res = await again.wait()
    expect(res.exitCode).toBe(0)
    expect(res.stdout).toContain('hello stdin\ndone\n')
  })

  test('kill ends a background command; its wait fails', async () => {
    const h = await sbx.commands.run('sleep 600', { background: true })
    expect(await sbx.commands.kill(h.pid)).toBe(true)
    const err = await h.wait().catch((e) => e)
    expect(err).toBeInstanceOf(CommandExitError)
    await waitFor('the killed command gone from the list', async () => {
      const ps = await sbx.commands.list()
      return !ps.some((p) => p.pid === h.pid)
    })
    expect(await sbx.commands.kill(h.pid)).toBe(false)
  })

  test('a pty: create, input, resize, kill', async () => {
    const data = []
    const dec = new TextDecoder()
    const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => data.push(dec.decode(d)) })
    expect(pty.pid).toBeGreaterThan(0)
    const enc = new TextEncoder()
    await sbx.pty.sendInput(pty.pid, enc.encode('stty size; echo pty-$((40+2))\n'))
    await waitFor('pty output', () => data.join('').includes('24 80') && data.join('').includes('pty-42'), 30_000)
    await sbx.pty.resize(pty.pid, { cols: 120, rows: 40 })
    await sbx.pty.sendInput(pty.pid, enc.encode('stty size\n'))
    await waitFor('resized', () => data.join('').includes('40 120'), 30_000)
    expect(await sbx.pty.kill(pty.pid)).toBe(true)
    const err = await pty.wait().catch((e) => e)
    expect(err).toBeInstanceOf(CommandExitError)
  })
})

// The control plane's part: not in debug mode, where the SDK has none.
describe.skipIf(debug)('a killed sandbox', () => {
  test('cuts a running command with the SDK error, and isRunning is false', async () => {
    const sbx = await create('base', { timeoutMs: 300_000 })
    const seen = []
    const run = sbx.commands.run('echo started; sleep 600', { onStdout: (d) => seen.push(d) })
    const outcome = run.then(
      () => 'finished',
      (e) => e,
    )
    await waitFor('the command started', () => seen.join('').includes('started'), 30_000)
    const t0 = Date.now()
    await sbx.kill()
    const err = await outcome
    expect(Date.now() - t0).toBeLessThan(20_000)
    expect(err).toBeInstanceOf(Error)
    expect(err).not.toBe('finished')
    expect(await sbx.isRunning()).toBe(false)
  })

  test('a background command\'s wait says the sandbox was killed', async () => {
    const sbx = await create('base', { timeoutMs: 300_000 })
    const cmd = await sbx.commands.run('sleep 60', { background: true })
    await sbx.kill()
    const err = await cmd.wait().catch((e) => e)
    // The connection is cut; the SDK asks /health (502) and says why.
    expect(err).toBeInstanceOf(TimeoutError)
    expect(err.message).toContain('sandbox was killed or reached its end of life')
  })
})
