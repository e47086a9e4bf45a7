// Shared by the tests: the daemon's E2B API, from the environment the
// SDK reads itself (E2B_API_URL, E2B_API_KEY).
import { Sandbox } from 'e2b'

export const apiUrl = process.env.E2B_API_URL
export const apiKey = process.env.E2B_API_KEY
if (!apiUrl || !apiKey) {
  throw new Error('set E2B_API_URL and E2B_API_KEY (test/e2e/e2b_sdk_test.go does)')
}

// A label unique to this run, so lists see only this run's sandboxes.
export const run = `r${Date.now().toString(36)}`

const made = []

// create makes a sandbox and kills it after the file's tests.
export async function create(template, opts = {}) {
  const sbx = await Sandbox.create(template, opts)
  made.push(sbx.sandboxId)
  return sbx
}

export async function cleanup() {
  await Promise.all(made.splice(0).map((id) => Sandbox.kill(id).catch(() => {})))
}

// waitFor polls fn until it returns a truthy value or ms pass.
export async function waitFor(what, fn, ms = 60_000) {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 250))
  }
}

// raw calls the API without the SDK, for the error shape itself.
export async function raw(method, path, { key = apiKey, body } = {}) {
  const headers = { 'Content-Type': 'application/json' }
  if (key) headers['X-API-KEY'] = key
  const res = await fetch(apiUrl + path, { method, headers, body: body && JSON.stringify(body) })
  return { status: res.status, body: await res.json() }
}
