// Sandbox.list's order and filters, as E2B serves them: newest first by
// default, order asc/desc, startedAfter, template. Through a control plane
// (CORRAL_CLUSTER=1) each node keeps its own order, so the order checks
// are the single daemon's (docs/CLUSTER.md).
import { afterAll, expect, test } from 'vitest'
import { Sandbox } from 'e2b'
import { cleanup, create, run } from './setup.mjs'

afterAll(cleanup)
const cluster = process.env.CORRAL_CLUSTER === '1'

const ids = (items) => items.map((s) => s.sandboxId)

test.skipIf(cluster)('newest first by default; order asc and desc', async () => {
  const label = `${run}-order`
  const older = await create('base', { metadata: { suite: label } })
  await new Promise((r) => setTimeout(r, 20))
  const newer = await create('base', { metadata: { suite: label } })
  const query = { metadata: { suite: label } }
  expect(ids(await Sandbox.list({ query }).nextItems())).toEqual([newer.sandboxId, older.sandboxId])
  expect(ids(await Sandbox.list({ query, order: 'desc' }).nextItems())).toEqual([newer.sandboxId, older.sandboxId])
  expect(ids(await Sandbox.list({ query, order: 'asc' }).nextItems())).toEqual([older.sandboxId, newer.sandboxId])
  // Pages of one follow the order too.
  const pager = Sandbox.list({ query, limit: 1 })
  const first = await pager.nextItems()
  const second = await pager.nextItems()
  expect(ids([...first, ...second])).toEqual([newer.sandboxId, older.sandboxId])
  expect(pager.hasNext).toBe(false)
})

test('startedAfter and template filter the list', async () => {
  const label = `${run}-filters`
  const sbx = await create('base', { metadata: { suite: label } })
  const info = await sbx.getInfo()
  const list = (query) => Sandbox.list({ query: { metadata: { suite: label }, ...query } }).nextItems()
  expect(ids(await list({ startedAfter: info.startedAt }))).toContain(sbx.sandboxId)
  expect(ids(await list({ startedAfter: new Date(info.startedAt.getTime() + 1000) }))).not.toContain(sbx.sandboxId)
  expect(ids(await list({ template: info.templateId }))).toEqual([sbx.sandboxId])
  expect(await list({ template: 'no-such-template' })).toHaveLength(0)
})

// Up to 100 copies (E2B's maximum); a daemon used to stop at 16. A
// cluster's test nodes hold 8 sandboxes each, so only the refusal there.
test('fork: more than 16 copies, and a count over 100 refused', async () => {
  const sbx = await create('base', { timeoutMs: 180_000, metadata: { suite: `${run}-fork` } })
  await expect(Sandbox.fork(sbx.sandboxId, { count: 101 })).rejects.toThrow(/want 1 to 100 copies, got 101/)
  if (cluster) return
  const copies = await Sandbox.fork(sbx.sandboxId, { count: 17, timeoutMs: 60_000 })
  try {
    expect(copies).toHaveLength(17)
    expect(new Set(copies.map((c) => c.sandboxId)).size).toBe(17)
  } finally {
    await Promise.all(copies.map((c) => c.kill().catch(() => {})))
  }
}, 240_000)
