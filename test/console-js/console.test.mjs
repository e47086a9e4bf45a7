// Browser test of Corral's web console, run by test/e2e TestConsole
// against a daemon it started. Environment: CORRAL_URL, CORRAL_TOKEN,
// CHROMIUM (the browser binary), OUT_DIR (screenshots, requests.json),
// DENY_URL (an address the sandbox's default policy denies, inside a
// namespace the Go test made). Exits non-zero with the failed step.
import { chromium } from "playwright-core";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const { CORRAL_URL: base, CORRAL_TOKEN: token, CHROMIUM: exe, OUT_DIR: out, DENY_URL: denyURL } = process.env;
for (const [k, v] of Object.entries({ CORRAL_URL: base, CORRAL_TOKEN: token, CHROMIUM: exe, OUT_DIR: out, DENY_URL: denyURL })) {
  if (!v) { console.error(`${k} is not set`); process.exit(2); }
}
const WAIT = 60_000;
let stepName = "start";
const t0 = Date.now();
const step = (name) => { stepName = name; console.log(`step at ${((Date.now() - t0) / 1000).toFixed(1)} s: ${name}`); };
const shot = (page, name) => page.screenshot({ path: join(out, name + ".png"), fullPage: true });

let page = null;
const browser = await chromium.launch({ executablePath: exe, headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
const requests = [], problems = [];
try {
  const ctx = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
  page = await ctx.newPage();
  page.setDefaultTimeout(WAIT);
  // Every request the browser sends for the page, from Chrome's own
  // network log (it has downloads too, which Playwright's request event
  // leaves out), and its WebSockets.
  const cdp = await ctx.newCDPSession(page);
  await cdp.send("Network.enable");
  cdp.on("Network.requestWillBeSent", (e) => { if (!e.request.url.startsWith("data:") && !e.request.url.startsWith("blob:")) requests.push({ method: e.request.method, url: e.request.url }); });
  cdp.on("Network.webSocketCreated", (e) => requests.push({ method: "WEBSOCKET", url: e.url }));
  page.on("console", (m) => { if (m.type() === "error" && /Content Security Policy|Refused to/.test(m.text())) problems.push(m.text()); });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("dialog", (d) => d.accept());

  step("a wrong token is refused");
  await page.goto(base + "/");
  await page.fill("#token", "not-the-token");
  await page.click("form.login button[type=submit]");
  await page.waitForFunction(() => /not this daemon's API token/.test(document.querySelector("#login-error")?.textContent || ""));
  await shot(page, "01-sign-in-refused");

  step("sign in");
  await page.fill("#token", token);
  await page.click("form.login button[type=submit]");
  await page.waitForSelector("#create-form");

  step("create a sandbox from the form");
  await page.selectOption("#new-runtime", "gvisor");
  await page.fill("#new-timeout", "600");
  await page.fill("#new-name", "console-e2e");
  await page.fill("#new-tags", "suite=console");
  await page.fill("#new-command", "echo started-by-console; exec sleep infinity");
  await page.click("#new-create");
  const row = page.locator("#sandbox-rows tr", { hasText: "console-e2e" });
  await row.locator(".state.running").waitFor();
  const id = await row.getAttribute("data-id");
  await shot(page, "02-sandboxes");

  step("filters: by tag and by runtime");
  await page.fill("#filter-tag", "suite=other");
  await page.press("#filter-tag", "Enter");
  await waitFor(async () => (await page.locator(`#sandbox-rows tr[data-id="${id}"]`).count()) === 0, "the tag filter hiding the sandbox");
  await page.fill("#filter-tag", "suite=console");
  await page.press("#filter-tag", "Enter");
  await page.locator(`#sandbox-rows tr[data-id="${id}"]`).waitFor();
  await page.selectOption("#filter-runtime", "vm");
  await waitFor(async () => (await page.locator(`#sandbox-rows tr[data-id="${id}"]`).count()) === 0, "the runtime filter hiding the sandbox");
  await page.selectOption("#filter-runtime", "");
  await page.fill("#filter-tag", "");
  await page.press("#filter-tag", "Enter");

  step("the sandbox page, reached by keyboard, and its terminal");
  await row.locator("a").first().focus();
  // Two refreshes of the list go by (the second starts after the first
  // redrew the rows): the focus must survive them.
  for (let i = 0; i < 2; i++) await page.waitForResponse((r) => r.url().includes("/v1/sandboxes?"));
  await page.keyboard.press("Enter");
  await page.waitForSelector("#record");
  await page.locator("#logs", { hasText: "started-by-console" }).waitFor();
  await page.click("#open-terminal");
  await page.waitForFunction(() => document.querySelector("#terminal-status")?.textContent === "Connected.");
  await page.click("#terminal");
  await page.keyboard.type("echo hello\n");
  const rowTexts = () => page.$$eval("#terminal .xterm-rows > div", (rs) => rs.map((r) => r.textContent.trim()));
  await waitFor(async () => (await rowTexts()).includes("hello"), "a terminal line reading hello");

  step("the terminal's size follows the window");
  const sizes = async () => (await rowTexts()).filter((t) => /^\d+ \d+$/.test(t));
  await page.keyboard.type("stty size\n");
  await waitFor(async () => (await sizes()).length === 1, "stty size's answer");
  const screenWidth = () => page.$eval("#terminal .xterm-screen", (e) => e.offsetWidth);
  const wide = await screenWidth();
  await page.setViewportSize({ width: 760, height: 900 });
  await waitFor(async () => (await screenWidth()) < wide, "the terminal refitted to a narrower window");
  await page.click("#terminal");
  await page.keyboard.type("stty size\n");
  await waitFor(async () => (await sizes()).length === 2, "stty size's second answer");
  const [before, after] = (await sizes()).map((t) => Number(t.split(" ")[1]));
  if (!(after < before)) throw new Error(`columns ${before} then ${after} after the window narrowed`);
  await page.setViewportSize({ width: 1280, height: 900 });

  step("a denied connection appears in the timeline");
  await page.keyboard.type(`curl -s -m 3 ${denyURL} ; echo curl-done\n`);
  const host = new URL(denyURL).hostname;
  await page.locator("#timeline li.denied", { hasText: host }).first().waitFor();
  await shot(page, "03-sandbox");

  step("edit the network policy");
  await page.check("#net-block");
  await page.click("#network button[type=submit]");
  await page.locator("#record dd", { hasText: "no network" }).waitFor();

  step("upload a file and see it listed");
  const data = randomBytes(96 * 1024);
  await page.fill("#files-path", "/tmp");
  await page.setInputFiles("#files-upload", { name: "console-upload.bin", mimeType: "application/octet-stream", buffer: data });
  const fileRow = page.locator('#file-rows tr[data-name="console-upload.bin"]');
  await fileRow.waitFor();

  step("download it back identical");
  const [dl] = await Promise.all([page.waitForEvent("download"), fileRow.locator("a").click()]);
  const got = readFileSync(await dl.path());
  if (!got.equals(data)) throw new Error(`downloaded ${got.length} bytes differ from the ${data.length} uploaded`);
  await shot(page, "04-files");

  step("pause and resume");
  await page.click("#act-pause");
  await page.locator("h1 .state.paused").waitFor();
  await shot(page, "05-paused");
  await page.click("#act-resume");
  await page.locator("h1 .state.running").waitFor();

  step("a memory snapshot, listed");
  await page.click("#act-snapshot-memory");
  await page.waitForFunction(() => /^Saved snapshot /.test(document.querySelector("#flash")?.textContent || ""));
  await page.goto(base + "/#/snapshots");
  await page.locator("#snapshots tbody tr", { hasText: id }).waitFor();
  await shot(page, "07-snapshots");

  step("fork");
  await page.goto(base + "/#/sandbox/" + id);
  await page.click("#act-fork");
  await page.waitForFunction(() => /^Forked into sb-/.test(document.querySelector("#flash")?.textContent || ""));
  await page.click("#act-snapshot-files");
  await page.waitForFunction(() => /^Saved image sha256:/.test(document.querySelector("#flash")?.textContent || ""));

  step("build an image, its steps streaming");
  await page.goto(base + "/#/images");
  await page.click("#build summary");
  await page.fill("#build-run", "echo built-by-console > /built");
  await page.fill("#build-tag", "console-e2e:1");
  await page.click("#build-start");
  await page.locator("#build-done").waitFor();
  await page.locator("#images .tag", { hasText: "console-e2e:1" }).waitFor();
  await shot(page, "06-images");

  step("the other pages");
  for (const [hash, sel, name] of [["#/pools", "#main .card", "08-pools"], ["#/host", "#main .chartbox", "09-host"]]) {
    await page.goto(base + "/" + hash);
    await page.waitForSelector(sel);
    await shot(page, name);
  }
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(base + "/#/");
  await page.locator(`#sandbox-rows tr[data-id="${id}"]`).waitFor();
  await shot(page, "10-phone");
  await page.goto(base + "/#/sandbox/" + id);
  await page.waitForSelector("#record");
  await shot(page, "11-phone-sandbox");
  await page.setViewportSize({ width: 1280, height: 900 });

  step("terminate and see it leave the live list");
  await page.goto(base + "/#/sandbox/" + id);
  await page.click("#act-terminate");
  await page.locator("h1 .state.terminated, h1 .state.terminating").first().waitFor();
  await page.goto(base + "/#/");
  await page.waitForSelector("#sandbox-rows", { state: "attached" });
  await waitFor(async () => (await page.locator(`#sandbox-rows tr[data-id="${id}"]`).count()) === 0, "the sandbox gone from the live list");

  step("sign out");
  await page.click("#logout");
  await page.waitForSelector("#token");

  step("every request was the public API's or the console's own");
  const allowed = /^\/(v1\/.+|console\/(assets\/.+|login|logout)|metrics|)$/;
  const bad = requests.filter((r) => { const u = new URL(r.url); return u.origin !== new URL(base).origin.replace(/^http/, u.protocol.startsWith("ws") ? "ws" : "http") || !allowed.test(u.pathname); });
  if (bad.length) throw new Error("requests outside the public API: " + JSON.stringify(bad));
  if (problems.length) throw new Error("browser problems: " + problems.join("; "));
  console.log(`ok: ${requests.length} requests, all public API or console paths`);
} catch (e) {
  console.error(`FAILED at step "${stepName}": ${e.message}`);
  if (problems.length) console.error("browser problems: " + problems.join("; "));
  if (page) {
    await shot(page, "failed").catch(() => {});
    console.error("the page's main: " + (await page.locator("#main").innerText().catch(() => "?")).slice(0, 3000));
  }
  process.exitCode = 1;
} finally {
  writeFileSync(join(out, "requests.json"), JSON.stringify(requests, null, 1));
  await browser.close();
}

async function waitFor(cond, what) {
  const end = Date.now() + WAIT;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("timed out waiting for " + what);
}
