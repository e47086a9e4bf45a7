// Bad input through the E2B face gets E2B's error shape, the SDK's own
// errors, and changes nothing.
import { afterAll, expect, test } from 'vitest'
import { AuthenticationError, Sandbox, SandboxError, SandboxNotFoundError } from 'e2b'
import { cleanup, create, raw, run } from './setup.mjs'

afterAll(cleanup)

test('a malformed or wrong key is a 401', async () => {
  for (const key of ['not-an-e2b-key', 'e2b_0123456789abcdef', 'e2b_']) {
    await expect(Sandbox.list({ apiKey: key }).nextItems()).rejects.toBeInstanceOf(AuthenticationError)
    await expect(Sandbox.create('base', { apiKey: key })).rejects.toBeInstanceOf(AuthenticationError)
    const res = await raw('GET', '/v2/sandboxes', { key })
    expect(res.status).toBe(401)
    expect(res.body).toEqual({ code: 401, message: expect.stringContaining('invalid API key') })
  }
  const res = await raw('GET', '/v2/sandboxes', { key: '' })
  expect(res).toEqual({ status: 401, body: { code: 401, message: expect.stringContaining('X-API-KEY') } })
})

test('an unknown sandbox is a 404 naming it', async () => {
  const id = 'sb-aaaaaaaaaaaaaaaa'
  await expect(Sandbox.getInfo(id)).rejects.toBeInstanceOf(SandboxNotFoundError)
  await expect(Sandbox.connect(id)).rejects.toBeInstanceOf(SandboxNotFoundError)
  await expect(Sandbox.setTimeout(id, 1000)).rejects.toBeInstanceOf(SandboxNotFoundError)
  await expect(Sandbox.pause(id)).rejects.toBeInstanceOf(SandboxNotFoundError)
  await expect(Sandbox.getMetrics(id)).rejects.toBeInstanceOf(SandboxNotFoundError)
  expect(await Sandbox.kill(id)).toBe(false)
  const res = await raw('GET', `/sandboxes/${id}`)
  expect(res).toEqual({ status: 404, body: { code: 404, message: expect.stringContaining(id) } })
})

test('an unknown template is a 404 naming it', async () => {
  const err = await Sandbox.create('no-such-template').catch((e) => e)
  expect(err).toBeInstanceOf(SandboxError)
  expect(err.message).toMatch(/^404: .*no-such-template/)
  const res = await raw('POST', '/v2/sandboxes', { body: { templateID: 'no-such-template' } })
  expect(res).toEqual({ status: 404, body: { code: 404, message: expect.stringContaining('no-such-template') } })
})

test('fields Corral cannot honour are 400s naming them, and nothing is created', async () => {
  const before = await Sandbox.list({ query: { metadata: { suite: run } } }).nextItems()
  for (const [body, field] of [
    [{ templateID: 'base', timeout: -5 }, 'timeout'],
    [{ templateID: 'base', network: { denyOut: ['10.0.0.0/8'] } }, 'network.denyOut'],
    [{ templateID: 'base', autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }, 'autoPauseMemory'],
    [{ templateID: 'base', autoPauseMemory: false }, 'autoPauseMemory'],
    [{ templateID: 'base', metadata: { suite: run, 'corral.pool': 'x' } }, 'metadata'],
    [{ templateID: 'base', volumeMounts: [{ name: 'v', path: '/v' }] }, 'volumeMounts'],
    [{ templateID: 'base', surprise: 1 }, 'surprise'],
  ]) {
    const res = await raw('POST', '/v2/sandboxes', { body })
    expect(res).toEqual({ status: 400, body: { code: 400, message: expect.stringContaining(field) } })
  }
  await expect(Sandbox.create('base', { network: { denyOut: ['10.0.0.0/8'] } })).rejects.toThrow(/network.denyOut/)
  const after = await Sandbox.list({ query: { metadata: { suite: run } } }).nextItems()
  expect(after).toEqual(before)
})

test('deleting an unknown snapshot is a 404 (false)', async () => {
  expect(await Sandbox.deleteSnapshot('snap-aaaaaaaaaaaaaaaa')).toBe(false)
  const res = await raw('DELETE', '/templates/no-such-snapshot')
  expect(res).toEqual({ status: 404, body: { code: 404, message: expect.stringContaining('no-such-snapshot') } })
})
