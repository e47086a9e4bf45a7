// Shared by the tests: they run against the daemon CORRAL_URL/CORRAL_TOKEN
// name (TestTypeScriptSDK in test/e2e starts one) and skip without it.
import { Sandbox } from "./src/index.js";

export const live = !!process.env.CORRAL_URL && !!process.env.CORRAL_TOKEN;
export const skip = live ? false : "needs a daemon: CORRAL_URL and CORRAL_TOKEN (go test ./test/e2e -run TestTypeScriptSDK)";

/** A gVisor sandbox for one test, tagged so that a leftover is found. */
export async function newSandbox(t, opts = {}) {
  const sb = await Sandbox.create({ timeout: 600, memory: 256, tags: { test: "ts-sdk" }, ...opts });
  t.after(() => sb.terminate().catch(() => {}));
  return sb;
}
