// Shared by the envd tests (commands, files, lifecycle-envd).

// debug is the SDK's debug mode (E2B_DEBUG=true): no control plane, and
// every Sandbox.create answers the one sandbox the daemon's
// --envd-debug-sandbox names (id "debug_sandbox_id", no access token).
export const debug = (process.env.E2B_DEBUG || '').toLowerCase() === 'true'

// unique is a path-safe name unique to this run, so tests sharing the
// debug sandbox never meet each other's files.
let n = 0
export function unique(prefix) {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${n++}`
}
