// Browser test of the ports origin, run by test/e2e
// TestPortsOriginBrowser: an operator signed in to the console opens a
// hostile page a sandbox serves on an exposed port, by its URL on the
// ports origin and by the API's port path (which must send the browser
// to the ports origin). The page tries to use the console's session; its
// report is written to OUT_DIR/origin.json for the Go test, and this
// script fails if any attempt got through. Environment: CORRAL_URL,
// CORRAL_TOKEN, CHROMIUM, PAGE_URL (the port's URL on the ports origin),
// API_PAGE_URL (the same page by the API's port path), VICTIM (another
// sandbox's id), OUT_DIR.
import { chromium } from "playwright-core";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const env = process.env;
for (const k of ["CORRAL_URL", "CORRAL_TOKEN", "CHROMIUM", "PAGE_URL", "API_PAGE_URL", "VICTIM", "OUT_DIR"]) {
  if (!env[k]) { console.error(`${k} is not set`); process.exit(2); }
}
const WAIT = 60_000;
const browser = await chromium.launch({ executablePath: env.CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
const runs = {};
let failed = false;
try {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  page.setDefaultTimeout(WAIT);
  console.log("sign in to the console");
  await page.goto(env.CORRAL_URL + "/");
  await page.fill("#token", env.CORRAL_TOKEN);
  await page.click("form.login button[type=submit]");
  await page.waitForSelector("#create-form");
  const cookies = await ctx.cookies(env.CORRAL_URL);
  // corral_session over plain HTTP, __Host-corral_session over TLS.
  if (!cookies.some((c) => c.name === "corral_session" || c.name === "__Host-corral_session")) throw new Error("signed in, yet no console session cookie: the test proves nothing");

  const q = "?api=" + encodeURIComponent(env.CORRAL_URL) + "&victim=" + encodeURIComponent(env.VICTIM);
  for (const [name, url] of [["ports origin", env.PAGE_URL + q], ["api path", env.API_PAGE_URL + q]]) {
    console.log(`open the sandbox's page by the ${name}: ${url}`);
    const p = await ctx.newPage();
    p.setDefaultTimeout(WAIT);
    await p.goto(url);
    await p.waitForFunction(() => document.title === "done");
    const r = await p.evaluate(() => window.results);
    r.final_url = p.url();
    runs[name] = r;
    console.log(JSON.stringify(r));
    const bad = [];
    if (/corral_/.test(r.cookie)) bad.push("the page read Corral's cookies: " + r.cookie);
    if (r.origin === new URL(env.CORRAL_URL).origin) bad.push("the page is of the API's (the console's) origin");
    if (/^status 2/.test(r.list)) bad.push("the page listed sandboxes: " + r.list);
    if (/^status 2/.test(r.create)) bad.push("the page created a sandbox: " + r.create);
    if (/^status 2/.test(r.exec)) bad.push("the page ran a command: " + r.exec);
    if (r.pty === "open") bad.push("the page opened a terminal in another sandbox");
    if (bad.length) { failed = true; console.error(`${name}:\n  ` + bad.join("\n  ")); }
    await p.close();
  }
  // The console still works: the planted cookie did not replace the session.
  const status = await page.evaluate(async () => (await fetch("/v1/sandboxes")).status);
  if (status !== 200) { failed = true; console.error(`the console's own session no longer lists sandboxes: ${status}`); }
} catch (e) {
  failed = true;
  console.error("error: " + (e.stack || e));
} finally {
  writeFileSync(join(env.OUT_DIR, "origin.json"), JSON.stringify(runs, null, 2));
  await browser.close();
}
process.exit(failed ? 1 : 0);
