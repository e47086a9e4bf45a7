// Filesystem-only pauses with the official SDK unchanged: pause({
// keepMemory: false }) and lifecycle.onTimeout { action: 'pause',
// keepMemory: false } keep the files and drop what ran; connect boots the
// sandbox afresh (a new boot id) under the same id and envd token.
import { afterAll, expect, test } from 'vitest'
import { Sandbox } from 'e2b'
import { cleanup, create, waitFor } from './setup.mjs'

afterAll(cleanup)

const bootId = async (sbx) => (await sbx.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()

test('pause({ keepMemory: false }) keeps the files; connect reboots', async () => {
  const sbx = await create('base', { timeoutMs: 300_000 })
  const file = '/home/user/fs_only.txt'
  await sbx.files.write(file, 'kept across a filesystem-only pause')
  await sbx.commands.run('rm -f /home/user/.bashrc')
  const sleeper = await sbx.commands.run('sleep 1000', { background: true })
  await sleeper.disconnect()
  const before = await bootId(sbx)

  expect(await sbx.pause({ keepMemory: false })).toBe(true)
  expect(await sbx.isRunning()).toBe(false)
  expect((await sbx.getInfo()).state).toBe('paused')
  // Only connect boots it: a call on its insides does not.
  await expect(sbx.files.read(file)).rejects.toThrow()

  const again = await sbx.connect()
  expect(again.sandboxId).toBe(sbx.sandboxId)
  expect(await again.isRunning()).toBe(true)
  expect(await again.files.read(file)).toBe('kept across a filesystem-only pause')
  expect(await again.files.exists('/home/user/.bashrc')).toBe(false)
  const after = await bootId(again)
  expect(after).not.toBe('')
  expect(after).not.toBe(before)
  const procs = await again.commands.list()
  expect(procs.map((p) => p.cmd + ' ' + (p.args || []).join(' ')).join('\n')).not.toContain('sleep 1000')
  // The same handle (its envd token) works after the reboot.
  expect((await sbx.commands.run('echo $((6 * 7))')).stdout.trim()).toBe('42')
})

test('onTimeout pause with keepMemory: false reboots on connect', async () => {
  const sbx = await create('base', {
    timeoutMs: 3_000,
    lifecycle: { onTimeout: { action: 'pause', keepMemory: false } },
  })
  await sbx.files.write('/home/user/marker.txt', 'auto-pause-fs-only')
  const before = await bootId(sbx)
  await waitFor('the timeout to pause the sandbox', async () => (await sbx.getInfo()).state === 'paused')
  await sbx.connect({ timeoutMs: 120_000 })
  expect((await sbx.files.read('/home/user/marker.txt')).trim()).toBe('auto-pause-fs-only')
  expect(await bootId(sbx)).not.toBe(before)
})

test("connect({ onResume: 'reboot' }) of a sandbox paused with its memory is a clear 400", async () => {
  const sbx = await create('base', { timeoutMs: 300_000 })
  await sbx.pause()
  await expect(Sandbox.connect(sbx.sandboxId, { onResume: 'reboot' })).rejects.toThrow(/400: .*memory/)
  expect((await sbx.getInfo()).state).toBe('paused')
  await sbx.connect()
  expect(await sbx.isRunning()).toBe(true)
})
