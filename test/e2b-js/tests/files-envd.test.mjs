// envd's filesystem rules through the official SDK, unchanged: relative
// paths against the requesting user's home (files, /files, a command's
// cwd), remove of a missing path, listings in name order, rename's entry
// with its metadata, getInfo of symlinks, and watchDir's includeEntry and
// allowNetworkMounts (envd 0.6.3 and 0.6.4).
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { FilesystemEventType } from 'e2b'
import { cleanup, create, waitFor } from './setup.mjs'
import { unique } from './envd.mjs'

afterAll(cleanup)

describe('envd filesystem rules', () => {
  let sbx
  let dir
  beforeAll(async () => {
    sbx = await create('base', { timeoutMs: 600_000 })
    dir = `/home/user/${unique('fsrules')}`
  })

  test('relative paths resolve against the requesting user home', async () => {
    const name = unique('rel')
    await sbx.files.write(`${name}.txt`, 'root', { user: 'root' })
    await sbx.files.write(`${name}.txt`, 'user', { user: 'user' })
    expect(await sbx.files.read(`/root/${name}.txt`)).toBe('root')
    expect(await sbx.files.read(`/home/user/${name}.txt`)).toBe('user')
    expect((await sbx.files.getInfo(`${name}.txt`, { user: 'root' })).path).toBe(`/root/${name}.txt`)
    expect(await sbx.files.read(`${name}.txt`, { user: 'root' })).toBe('root')
    await sbx.files.makeDir(`${name}-d`, { user: 'root' })
    const root = await sbx.commands.run('pwd', { cwd: `${name}-d`, user: 'root' })
    expect(root.stdout).toBe(`/root/${name}-d\n`)
    await sbx.files.makeDir(`${name}-d`, { user: 'user' })
    const user = await sbx.commands.run('pwd', { cwd: `${name}-d`, user: 'user' })
    expect(user.stdout).toBe(`/home/user/${name}-d\n`)
    const moved = await sbx.files.rename(`${name}.txt`, `${name}-moved.txt`, { user: 'root' })
    expect(moved.path).toBe(`/root/${name}-moved.txt`)
    await sbx.files.remove(`${name}-moved.txt`, { user: 'root' })
    expect(await sbx.files.exists(`/root/${name}-moved.txt`)).toBe(false)
    // No relative path leaves the sandbox: .. stops at its root.
    expect((await sbx.files.getInfo('../../../../etc/passwd', { user: 'root' })).path).toBe('/etc/passwd')
  })

  test('remove of a missing path succeeds', async () => {
    await sbx.files.remove(`${dir}/never/was`)
    await sbx.files.remove(`${dir}-missing`)
    expect(await sbx.files.exists(`${dir}-missing`)).toBe(false)
  })

  test('listings are in name order', async () => {
    const names = ['b', 'a-b', 'C', '_x', 'c']
    await sbx.files.write(names.map((n) => ({ path: `${dir}/sorted/${n}`, data: n })))
    await sbx.files.makeDir(`${dir}/sorted/a/inner`)
    const top = await sbx.files.list(`${dir}/sorted`)
    expect(top.map((e) => e.name)).toEqual(['C', '_x', 'a', 'a-b', 'b', 'c'])
    const deep = await sbx.files.list(`${dir}/sorted`, { depth: 2 })
    expect(deep.map((e) => e.path.slice(`${dir}/sorted/`.length))).toEqual(['C', '_x', 'a', 'a/inner', 'a-b', 'b', 'c'])
  })

  test('rename returns the entry with its metadata', async () => {
    await sbx.files.write(`${dir}/ren/from.txt`, 'r', { metadata: { owner: 'ann' } })
    const moved = await sbx.files.rename(`${dir}/ren/from.txt`, `${dir}/ren/to.txt`)
    expect(moved.name).toBe('to.txt')
    expect(moved.path).toBe(`${dir}/ren/to.txt`)
    expect(moved.type).toBe('file')
    expect(moved.size).toBe(1)
    expect(moved.metadata).toEqual({ owner: 'ann' })
  })

  test('getInfo of a symlink gives the resolved absolute target and its type and mode', async () => {
    const d = `${dir}/links`
    await sbx.files.write(`${d}/real/target.txt`, 'twelve bytes')
    await sbx.commands.run(
      `chmod 640 ${d}/real/target.txt && cd ${d} && ln -s real/target.txt f && ln -s f ff && ln -s real dl && ln -s nope dangling`,
    )
    const f = await sbx.files.getInfo(`${d}/f`)
    expect(f.name).toBe('f')
    expect(f.path).toBe(`${d}/f`)
    expect(f.type).toBe('file')
    expect(f.symlinkTarget).toBe(`${d}/real/target.txt`)
    expect(f.mode).toBe(0o640)
    // A chain of links ends at the file; a link to a directory is a dir.
    expect((await sbx.files.getInfo(`${d}/ff`)).symlinkTarget).toBe(`${d}/real/target.txt`)
    const dl = await sbx.files.getInfo(`${d}/dl`)
    expect(dl.type).toBe('dir')
    expect(dl.symlinkTarget).toBe(`${d}/real`)
    // Through a linked directory, the target is the real path.
    expect((await sbx.files.getInfo(`${d}/dl/../ff`)).symlinkTarget).toBe(`${d}/real/target.txt`)
    const dangling = await sbx.files.getInfo(`${d}/dangling`)
    expect(dangling.symlinkTarget).toBe('nope')
    expect(dangling.type).toBeUndefined()
    const listed = await sbx.files.list(d)
    expect(listed.find((e) => e.name === 'dl').type).toBe('dir')
  })

  test('watchDir with includeEntry carries the entry; allowNetworkMounts is accepted', async () => {
    const w = `${dir}/watch-entry`
    await sbx.files.makeDir(w)
    const events = []
    const handle = await sbx.files.watchDir(w, (e) => events.push(e), { includeEntry: true, allowNetworkMounts: true })
    try {
      const of = (type) => events.find((e) => e.type === type && e.name === 'new.txt')
      const saw = (type) =>
        waitFor(`a ${type} event`, () => of(type), 30_000).catch((e) => {
          throw new Error(`${e.message}: saw ${JSON.stringify(events)}`)
        })
      await sbx.files.write(`${w}/new.txt`, 'hello')
      await saw(FilesystemEventType.CREATE)
      await sbx.commands.run(`rm ${w}/new.txt`)
      await saw(FilesystemEventType.REMOVE)
      const created = of(FilesystemEventType.CREATE)
      expect(created.entry.path).toBe(`${w}/new.txt`)
      expect(created.entry.type).toBe('file')
      expect(of(FilesystemEventType.REMOVE).entry).toBeUndefined()
    } finally {
      await handle.stop()
    }
  })
})
