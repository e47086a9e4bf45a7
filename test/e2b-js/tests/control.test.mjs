// The control plane through the official SDK, unchanged: create, info,
// list, timeout, connect, kill, pause and resume, metrics, snapshots. No
// test here calls envd (the sandbox's processes and files).
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { ALL_TRAFFIC, Sandbox, SandboxNotFoundError } from 'e2b'
import { cleanup, create, run, waitFor } from './setup.mjs'

afterAll(cleanup)

describe('a sandbox from base', () => {
  let sbx
  beforeAll(async () => {
    // The first create from base builds its image.
    sbx = await create('base', { timeoutMs: 300_000, metadata: { suite: run, role: 'first' }, envs: { GREETING: 'hi' } })
  })

  test('create answers with an id, envd version and access token', () => {
    expect(sbx.sandboxId).toMatch(/^sb-/)
    expect(sbx.envdAccessToken).toBeTruthy()
  })

  test('getInfo', async () => {
    const info = await sbx.getInfo()
    expect(info.sandboxId).toBe(sbx.sandboxId)
    expect(info.templateId).toBe('base')
    expect(info.state).toBe('running')
    expect(info.metadata).toEqual({ suite: run, role: 'first' })
    expect(info.envdVersion).toBe('0.6.4')
    expect(info.cpuCount).toBeGreaterThan(0)
    expect(info.memoryMB).toBeGreaterThan(0)
    const left = info.endAt.getTime() - Date.now()
    expect(left).toBeGreaterThan(250_000)
    expect(left).toBeLessThanOrEqual(301_000)
  })

  test('connect extends the lifetime and never shortens it', async () => {
    const before = (await sbx.getInfo()).endAt.getTime()
    await Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 })
    expect((await sbx.getInfo()).endAt.getTime()).toBe(before)
    await Sandbox.connect(sbx.sandboxId, { timeoutMs: 900_000 })
    const after = (await sbx.getInfo()).endAt.getTime()
    expect(after).toBeGreaterThan(before)
    expect(after - Date.now()).toBeGreaterThan(850_000)
  })

  test('getMetrics returns samples', async () => {
    const samples = await waitFor('metrics', async () => {
      const m = await sbx.getMetrics()
      return m.length > 0 && m
    })
    const s = samples[samples.length - 1]
    expect(s.timestamp).toBeInstanceOf(Date)
    expect(s.cpuCount).toBeGreaterThan(0)
    expect(s.memTotal).toBeGreaterThan(0)
    expect(s.memUsed).toBeGreaterThan(0)
    expect(s.diskTotal).toBeGreaterThan(0)
    expect(s.cpuUsedPct).toBeGreaterThanOrEqual(0)
  })
})

test('list pages through sandboxes filtered by metadata', async () => {
  const label = `${run}-list`
  const ids = []
  for (let i = 0; i < 3; i++) {
    ids.push((await create('base', { metadata: { suite: label, n: String(i) } })).sandboxId)
  }
  await create('base', { metadata: { suite: `${label}-other` } })
  const pager = Sandbox.list({ query: { metadata: { suite: label } }, limit: 2 })
  const first = await pager.nextItems()
  expect(first).toHaveLength(2)
  expect(pager.hasNext).toBe(true)
  const second = await pager.nextItems()
  expect(pager.hasNext).toBe(false)
  expect([...first, ...second].map((s) => s.sandboxId).sort()).toEqual([...ids].sort())
  for (const s of [...first, ...second]) {
    expect(s.metadata.suite).toBe(label)
    expect(s.state).toBe('running')
    expect(s.templateId).toBe('base')
  }
  const paused = await Sandbox.list({ query: { metadata: { suite: label }, state: ['paused'] } }).nextItems()
  expect(paused).toHaveLength(0)
})

test('setTimeout ends a sandbox early', async () => {
  const sbx = await create('base', { timeoutMs: 600_000 })
  await sbx.setTimeout(2_000)
  await waitFor('the sandbox to end', async () => {
    try {
      await sbx.getInfo()
      return false
    } catch (e) {
      if (e instanceof SandboxNotFoundError) return true
      throw e
    }
  }, 30_000)
})

test('kill', async () => {
  const sbx = await create('base')
  expect(await Sandbox.kill(sbx.sandboxId)).toBe(true)
  await expect(Sandbox.getInfo(sbx.sandboxId)).rejects.toBeInstanceOf(SandboxNotFoundError)
  expect(await Sandbox.kill(sbx.sandboxId)).toBe(false)
  const listed = await Sandbox.list({ query: { metadata: { suite: run } } }).nextItems()
  expect(listed.map((s) => s.sandboxId)).not.toContain(sbx.sandboxId)
})

test('pause, then connect resumes', async () => {
  const sbx = await create('base', { timeoutMs: 120_000 })
  expect(await sbx.pause()).toBe(true)
  expect((await sbx.getInfo()).state).toBe('paused')
  expect(await sbx.pause()).toBe(false) // already paused: 409
  const paused = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
  expect(paused.map((s) => s.sandboxId)).toContain(sbx.sandboxId)
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 })
  expect(again.sandboxId).toBe(sbx.sandboxId)
  expect(again.envdAccessToken).toBe(sbx.envdAccessToken)
  expect((await sbx.getInfo()).state).toBe('running')
})

test('lifecycle onTimeout pause pauses at the end of the lifetime; connect resumes', async () => {
  const sbx = await create('base', { timeoutMs: 3_000, lifecycle: { onTimeout: 'pause' } })
  const info = await sbx.getInfo()
  expect(info.lifecycle).toEqual({ onTimeout: 'pause', autoResume: false })
  await waitFor('the timeout to pause it', async () => (await sbx.getInfo()).state === 'paused', 60_000)
  await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 })
  const resumed = await sbx.getInfo()
  expect(resumed.state).toBe('running')
  expect(resumed.endAt.getTime() - Date.now()).toBeGreaterThan(30_000)
})

test('snapshots: create, list, create from, delete', async () => {
  const sbx = await create('base', { timeoutMs: 120_000, metadata: { suite: run } })
  const name = `${run}-snap`
  const snap = await sbx.createSnapshot({ name })
  expect(snap.snapshotId).toMatch(/^snap-/)
  expect(snap.names).toEqual([name])
  const listed = await sbx.listSnapshots().nextItems()
  expect(listed.map((s) => s.snapshotId)).toEqual([snap.snapshotId])
  const copy = await create(snap.snapshotId, { timeoutMs: 60_000 })
  const info = await copy.getInfo()
  expect(info.state).toBe('running')
  expect(info.templateId).toBe(snap.snapshotId)
  const byName = await create(name, { timeoutMs: 60_000 })
  expect((await byName.getInfo()).templateId).toBe(name)
  expect(await Sandbox.deleteSnapshot(snap.snapshotId)).toBe(true)
  expect(await Sandbox.deleteSnapshot(snap.snapshotId)).toBe(false)
  expect((await sbx.listSnapshots().nextItems())).toHaveLength(0)
})

test('fork makes running copies', async () => {
  const sbx = await create('base', { timeoutMs: 120_000, metadata: { suite: run, role: 'parent' } })
  const copies = await Sandbox.fork(sbx.sandboxId, { count: 2, timeoutMs: 60_000 })
  expect(copies).toHaveLength(2)
  for (const c of copies) {
    expect(c).toBeInstanceOf(Sandbox)
    expect(c.sandboxId).not.toBe(sbx.sandboxId)
    const info = await c.getInfo()
    await c.kill()
    expect(info.state).toBe('running')
    expect(info.templateId).toBe('base')
    expect(info.metadata).toEqual({ suite: run, role: 'parent' })
    expect(info.endAt.getTime() - Date.now()).toBeLessThanOrEqual(61_000)
  }
  expect((await sbx.getInfo()).state).toBe('running')
})

test('network: allowInternetAccess and updateNetwork', async () => {
  const closed = await create('base', { allowInternetAccess: false })
  const info = await closed.getInfo()
  expect(info.allowInternetAccess).toBe(false)
  expect(info.network.denyOut).toEqual(['0.0.0.0/0'])

  const sbx = await create('base')
  expect((await sbx.getInfo()).allowInternetAccess).toBe(true)
  await sbx.updateNetwork({ denyOut: [ALL_TRAFFIC], allowOut: ['198.51.100.7', 'example.com'] })
  const limited = await sbx.getInfo()
  expect(limited.network.denyOut).toEqual([ALL_TRAFFIC])
  expect(limited.network.allowOut).toEqual(['198.51.100.7/32', 'example.com'])
  await expect(sbx.updateNetwork({ denyOut: ['10.0.0.0/8'] })).rejects.toThrow(/400: .*network.denyOut/)
  await expect(sbx.updateNetwork({ egressProxy: { address: 'proxy:1080' } })).rejects.toThrow(/400: .*network.egressProxy/)
  expect((await sbx.getInfo()).network.allowOut).toEqual(['198.51.100.7/32', 'example.com'])
  await sbx.updateNetwork({})
  const open = await sbx.getInfo()
  expect(open.allowInternetAccess).toBe(true)
  expect(open.network).toBeUndefined()
})
