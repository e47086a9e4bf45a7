// envd across the sandbox's lifecycle and at its edges, with the official
// SDK unchanged: pause then connect keeps files, env and a running
// process; signed upload and download URLs (an expired one refused); bad
// input through envd in E2B's error shape, changing nothing.
import { afterAll, describe, expect, test } from 'vitest'
import { FileNotFoundError, InvalidArgumentError, Sandbox, SandboxError } from 'e2b'
import { cleanup, create, waitFor } from './setup.mjs'

afterAll(cleanup)

const envdUrl = process.env.E2B_SANDBOX_URL

// envd calls a sandbox's envd face without the SDK, for the error shape.
async function envd(sbx, method, path, { body, headers = {}, token = sbx.envdAccessToken } = {}) {
  const h = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', ...headers }
  if (token) h['X-Access-Token'] = token
  const res = await fetch(envdUrl + path, { method, headers: h, body })
  const text = await res.text()
  let json
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.status, body: json, text }
}

test('pause, then connect resumes with files, env and a running process intact', async () => {
  const sbx = await create('base', { timeoutMs: 300_000, envs: { KEPT: 'kept-value' } })
  await sbx.files.write('/home/user/state.txt', 'before pause')
  const counter = await sbx.commands.run('i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done', {
    background: true,
  })
  const pid = counter.pid
  await counter.disconnect()
  expect(await sbx.pause()).toBe(true)
  expect((await sbx.getInfo()).state).toBe('paused')

  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 300_000 })
  expect((await again.getInfo()).state).toBe('running')
  expect(await again.files.read('/home/user/state.txt')).toBe('before pause')
  expect((await again.commands.run('echo $KEPT')).stdout).toBe('kept-value\n')
  const ps = await again.commands.list()
  expect(ps.map((p) => p.pid)).toContain(pid)
  const seen = []
  const h = await again.commands.connect(pid, { onStdout: (d) => seen.push(d) })
  await waitFor('the process ticking after resume', () => /tick \d+/.test(seen.join('')), 30_000)
  expect(await again.commands.kill(pid)).toBe(true)
  await h.wait().catch(() => {})
}, 300_000)

describe('signed URLs', () => {
  test('upload and download through signed URLs, no headers', async () => {
    const sbx = await create('base', { timeoutMs: 120_000 })
    expect(sbx.envdAccessToken).toBeTruthy()
    const up = await sbx.uploadUrl('/home/user/signed.txt', { useSignatureExpiration: 120 })
    expect(up).toContain('signature=v1_')
    const form = new FormData()
    form.append('file', new Blob(['signed upload\n']), 'signed.txt')
    const put = await fetch(up, { method: 'POST', body: form })
    expect(put.status).toBe(200)
    expect(await sbx.files.read('/home/user/signed.txt')).toBe('signed upload\n')

    const down = await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: 120 })
    expect(down).toContain('signature_expiration=')
    const got = await fetch(down)
    expect(got.status).toBe(200)
    expect(await got.text()).toBe('signed upload\n')
  })

  test('an expired or forged signature is refused with the exact body', async () => {
    const sbx = await create('base', { timeoutMs: 120_000 })
    await sbx.files.write('/home/user/secret.txt', 'secret')
    const expiring = await sbx.downloadUrl('/home/user/secret.txt', { useSignatureExpiration: 1 })
    await new Promise((r) => setTimeout(r, 2_500))
    const res = await fetch(expiring)
    expect(res.status).toBe(401)
    expect(await res.json()).toEqual({ code: 401, message: 'signature is already expired' })

    const good = new URL(await sbx.downloadUrl('/home/user/secret.txt', { useSignatureExpiration: 120 }))
    good.searchParams.set('path', '/home/user/other.txt')
    const forged = await fetch(good)
    expect(forged.status).toBe(401)
    expect(await forged.json()).toEqual({ code: 401, message: 'invalid signature' })
    // Through the headers too (the sandbox named, no token).
    const exp = Math.floor(Date.now() / 1000) + 60
    const bad = await envd(sbx, 'GET', `/files?path=/home/user/secret.txt&signature=v1_AAAA&signature_expiration=${exp}`, { token: '' })
    expect(bad).toMatchObject({ status: 401, body: { code: 401, message: 'invalid signature' } })
  })

  test('a signed URL that never expires, or expires too far ahead, is refused', async () => {
    const sbx = await create('base', { timeoutMs: 120_000 })
    await sbx.files.write('/home/user/secret.txt', 'secret')
    const forever = await fetch(await sbx.downloadUrl('/home/user/secret.txt'))
    expect(forever.status).toBe(401)
    expect((await forever.json()).message).toMatch(/signature_expiration is required/)
    const upForever = await fetch(await sbx.uploadUrl('/home/user/x.txt'), { method: 'POST', body: new FormData() })
    expect(upForever.status).toBe(401)
    const far = await fetch(await sbx.downloadUrl('/home/user/secret.txt', { useSignatureExpiration: 8 * 24 * 3600 }))
    expect(far.status).toBe(401)
    expect(await far.json()).toEqual({ code: 401, message: 'signature_expiration is more than 7 days ahead' })
    const week = await fetch(await sbx.downloadUrl('/home/user/secret.txt', { useSignatureExpiration: 7 * 24 * 3600 - 60 }))
    expect(week.status).toBe(200)
    expect(await week.text()).toBe('secret')
  })

  test('signature expiration needs a secured sandbox', async () => {
    const sbx = await create('base', { timeoutMs: 60_000 })
    const plain = await Sandbox.connect(sbx.sandboxId)
    plain.envdAccessToken = undefined
    await expect(plain.downloadUrl('/x', { useSignatureExpiration: 10 })).rejects.toBeInstanceOf(InvalidArgumentError)
  })
})

describe('bad input through envd', () => {
  test('a wrong or missing access token is a 401', async () => {
    const sbx = await create('base', { timeoutMs: 60_000 })
    expect(await envd(sbx, 'GET', '/files?path=/etc/hostname', { token: 'wrong' })).toMatchObject({
      status: 401,
      body: { code: 401, message: 'invalid access token' },
    })
    expect(await envd(sbx, 'GET', '/files?path=/etc/hostname', { token: '' })).toMatchObject({
      status: 401,
      body: { code: 401, message: 'missing access token or file signature' },
    })
    // Another sandbox's token opens nothing here.
    const other = await create('base', { timeoutMs: 60_000 })
    expect((await envd(sbx, 'GET', '/files?path=/etc/hostname', { token: other.envdAccessToken })).status).toBe(401)
  })

  test('paths escaping the root stay inside the sandbox; a missing file is a 404', async () => {
    const sbx = await create('base', { timeoutMs: 60_000 })
    // The sandbox's root is its own: ../ climbs no further than it.
    const up = await sbx.files.read('/home/user/../../../../etc/hostname')
    expect(up).toBe((await sbx.commands.run('cat /etc/hostname')).stdout)
    const res = await envd(sbx, 'GET', '/files?path=' + encodeURIComponent('/../../no/such/file'))
    expect(res).toMatchObject({ status: 404, body: { code: 404, message: expect.any(String) } })
    expect(res.text).not.toMatch(/\/var\/lib\/corral|\/tmp\/corral/)
    await expect(sbx.files.read('/no/such/file')).rejects.toBeInstanceOf(FileNotFoundError)
    // An empty or relative path with no user is refused by name.
    const empty = await envd(sbx, 'GET', '/files?path=')
    expect(empty.status).toBeGreaterThanOrEqual(400)
    expect(empty.body).toMatchObject({ code: empty.status, message: expect.any(String) })
  })

  test('a watch on a missing path is the SDK error, and the sandbox carries on', async () => {
    const sbx = await create('base', { timeoutMs: 60_000 })
    const err = await sbx.files.watchDir('/no/such/dir', () => {}).catch((e) => e)
    expect(err).toBeInstanceOf(SandboxError)
    expect(err.message).toMatch(/not found|no such/i)
    expect((await sbx.commands.run('echo alive')).stdout).toBe('alive\n')
  })

  test('an unknown sandbox is a 502 in envd shape', async () => {
    const res = await envd({ sandboxId: 'sb-aaaaaaaaaaaaaaaa', envdAccessToken: 'x' }, 'GET', '/health')
    expect(res).toMatchObject({ status: 502, body: { code: 502, message: expect.any(String) } })
  })
})
