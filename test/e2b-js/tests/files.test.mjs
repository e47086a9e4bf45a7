// Files through envd with the official SDK, unchanged: write and read
// (text, bytes, streams, 100 MB), many files at once, list, exists,
// getInfo, metadata, makeDir, rename, remove, watchDir. Also run in the SDK's debug
// mode (E2B_DEBUG=true); each test works under a directory of its own.
import { createHash, randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { FilesystemEventType, NotFoundError } from 'e2b'
import { cleanup, create, waitFor } from './setup.mjs'
import { unique } from './envd.mjs'

afterAll(cleanup)

async function readAll(stream) {
  const chunks = []
  for await (const c of stream) chunks.push(Buffer.from(c))
  return Buffer.concat(chunks)
}

describe('files', () => {
  let sbx
  let dir
  beforeAll(async () => {
    sbx = await create('base', { timeoutMs: 600_000 })
    dir = `/home/user/${unique('files')}`
  })

  test('write and read text, bytes, blob and stream', async () => {
    const info = await sbx.files.write(`${dir}/a/hello.txt`, 'hello, world\n')
    expect(info.path).toBe(`${dir}/a/hello.txt`)
    expect(info.name).toBe('hello.txt')
    expect(await sbx.files.read(`${dir}/a/hello.txt`)).toBe('hello, world\n')
    const bytes = new Uint8Array([0, 1, 2, 250, 255])
    await sbx.files.write(`${dir}/bin`, bytes)
    expect(await sbx.files.read(`${dir}/bin`, { format: 'bytes' })).toEqual(bytes)
    const blob = await sbx.files.read(`${dir}/bin`, { format: 'blob' })
    expect(new Uint8Array(await blob.arrayBuffer())).toEqual(bytes)
    const stream = await sbx.files.read(`${dir}/a/hello.txt`, { format: 'stream' })
    expect((await readAll(stream)).toString()).toBe('hello, world\n')
    // The file the SDK wrote belongs to the default user.
    const res = await sbx.commands.run(`stat -c %U ${dir}/a/hello.txt`)
    expect(res.stdout).toBe('user\n')
  })

  test('a 100 MB file goes up as a stream and comes back byte-identical', async () => {
    const chunk = randomBytes(1 << 20)
    const want = createHash('sha256')
    let i = 0
    const src = new ReadableStream({
      pull(c) {
        if (i === 100) return c.close()
        const b = Buffer.from(chunk)
        b.writeUInt32LE(i++, 0)
        want.update(b)
        c.enqueue(new Uint8Array(b))
      },
    })
    await sbx.files.write(`${dir}/big.bin`, src)
    const wantHex = want.digest('hex')
    const inside = await sbx.commands.run(`sha256sum ${dir}/big.bin`)
    expect(inside.stdout.split(' ')[0]).toBe(wantHex)
    const got = createHash('sha256')
    let n = 0
    for await (const c of await sbx.files.read(`${dir}/big.bin`, { format: 'stream' })) {
      got.update(c)
      n += c.length
    }
    expect(n).toBe(100 << 20)
    expect(got.digest('hex')).toBe(wantHex)
  }, 300_000)

  test('write many files at once', async () => {
    const infos = await sbx.files.write([
      { path: `${dir}/many/one.txt`, data: 'one' },
      { path: `${dir}/many/sub/two.txt`, data: new TextEncoder().encode('two') },
      { path: `${dir}/many/three.txt`, data: new Blob(['three']) },
    ])
    expect(infos.map((i) => i.path).sort()).toEqual(
      [`${dir}/many/one.txt`, `${dir}/many/sub/two.txt`, `${dir}/many/three.txt`].sort(),
    )
    expect(await sbx.files.read(`${dir}/many/sub/two.txt`)).toBe('two')
    expect(await sbx.files.read(`${dir}/many/three.txt`)).toBe('three')
  })

  test('list with depth, exists, getInfo', async () => {
    await sbx.files.write([
      { path: `${dir}/tree/f1`, data: '1' },
      { path: `${dir}/tree/d1/f2`, data: '22' },
      { path: `${dir}/tree/d1/d2/f3`, data: '333' },
    ])
    const top = await sbx.files.list(`${dir}/tree`)
    expect(top.map((e) => e.name).sort()).toEqual(['d1', 'f1'])
    const d1 = top.find((e) => e.name === 'd1')
    expect(d1.type).toBe('dir')
    const deep = await sbx.files.list(`${dir}/tree`, { depth: 2 })
    expect(deep.map((e) => e.path).sort()).toEqual(
      [`${dir}/tree/d1`, `${dir}/tree/d1/d2`, `${dir}/tree/d1/f2`, `${dir}/tree/f1`].sort(),
    )
    expect(await sbx.files.exists(`${dir}/tree/d1/f2`)).toBe(true)
    expect(await sbx.files.exists(`${dir}/tree/nope`)).toBe(false)
    const info = await sbx.files.getInfo(`${dir}/tree/d1/f2`)
    expect(info.name).toBe('f2')
    expect(info.type).toBe('file')
    expect(info.size).toBe(2)
    expect(info.owner).toBe('user')
    expect(info.modifiedTime).toBeInstanceOf(Date)
    await expect(sbx.files.getInfo(`${dir}/tree/nope`)).rejects.toBeInstanceOf(NotFoundError)
  })

  test('metadata: written, read back by getInfo and list, replaced by the next write', async () => {
    const want = { author: 'ann', purpose: 'sdk test' }
    const info = await sbx.files.write(`${dir}/meta/m.txt`, 'm', { metadata: { Author: 'ann', purpose: 'sdk test' } })
    expect(info.metadata).toEqual(want)
    expect((await sbx.files.getInfo(`${dir}/meta/m.txt`)).metadata).toEqual(want)
    const listed = await sbx.files.list(`${dir}/meta`)
    expect(listed.find((e) => e.name === 'm.txt').metadata).toEqual(want)
    const again = await sbx.files.write(`${dir}/meta/m.txt`, 'n')
    expect(again.metadata).toBeUndefined()
    expect((await sbx.files.getInfo(`${dir}/meta/m.txt`)).metadata).toBeUndefined()
  })

  test('makeDir, rename, remove', async () => {
    expect(await sbx.files.makeDir(`${dir}/mk/a/b`)).toBe(true)
    expect(await sbx.files.makeDir(`${dir}/mk/a/b`)).toBe(false)
    await sbx.files.write(`${dir}/mk/a/b/f`, 'x')
    const moved = await sbx.files.rename(`${dir}/mk/a`, `${dir}/mk/z`)
    expect(moved.path).toBe(`${dir}/mk/z`)
    expect(await sbx.files.read(`${dir}/mk/z/b/f`)).toBe('x')
    expect(await sbx.files.exists(`${dir}/mk/a`)).toBe(false)
    await sbx.files.remove(`${dir}/mk/z`)
    expect(await sbx.files.exists(`${dir}/mk/z`)).toBe(false)
    await expect(sbx.files.read(`${dir}/mk/z/b/f`)).rejects.toBeInstanceOf(NotFoundError)
  })

  test('watchDir, recursive, sees create, write, remove and rename', async () => {
    const w = `${dir}/watched`
    await sbx.files.makeDir(`${w}/sub`)
    const events = []
    const handle = await sbx.files.watchDir(w, (e) => events.push(e), { recursive: true })
    try {
      await sbx.files.write(`${w}/sub/new.txt`, 'first')
      await sbx.files.write(`${w}/sub/new.txt`, 'second')
      await sbx.commands.run(`mv ${w}/sub/new.txt ${w}/sub/moved.txt && rm ${w}/sub/moved.txt`)
      const has = (type, name) => events.some((e) => e.type === type && e.name === name)
      await waitFor(
        'watch events',
        () =>
          has(FilesystemEventType.CREATE, 'sub/new.txt') &&
          has(FilesystemEventType.WRITE, 'sub/new.txt') &&
          has(FilesystemEventType.RENAME, 'sub/new.txt') &&
          has(FilesystemEventType.REMOVE, 'sub/moved.txt'),
        30_000,
      ).catch((e) => {
        throw new Error(`${e.message}: saw ${JSON.stringify(events)}`)
      })
    } finally {
      await handle.stop()
    }
  })
})
