import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, mkdir, writeFile, symlink, chmod, utimes } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Image, Sandbox, InvalidArgumentError } from "../src/index.js";
import { tarTree } from "../src/tar.js";
import { skip, newSandbox } from "../test-helpers.mjs";

test("the builder writes corral image build's spec; each call a new Image", () => {
  const base = Image.debian();
  const img = base
    .aptInstall("git", "curl")
    .pipInstall("requests==2.32.3", "numpy")
    .pipInstall(["mypkg"], { findLinks: ["/opt/wheels"], noIndex: true, indexUrl: "http://127.0.0.1:1/simple" })
    .npmInstall("left-pad")
    .runCommands("echo one", "echo two")
    .addLocalDir("./app", "/opt/app")
    .env({ GREETING: "hi" })
    .workdir("/opt/app")
    .user("nobody")
    .cmd(["python3", "main.py"]);
  assert.deepEqual(base.toSpec(), { base: { debian: "bookworm" } });
  assert.deepEqual(img.toSpec(), {
    base: { debian: "bookworm" },
    steps: [
      { apt_install: ["git", "curl"] },
      { pip_install: { packages: ["requests==2.32.3", "numpy"] } },
      { pip_install: { packages: ["mypkg"], index_url: "http://127.0.0.1:1/simple", find_links: ["/opt/wheels"], no_index: true } },
      { npm_install: { packages: ["left-pad"] } },
      { run: ["echo one", "echo two"] },
      { copy: { src: "./app", dst: "/opt/app" } },
      { env: { GREETING: "hi" } },
      { workdir: "/opt/app" },
      { user: "nobody" },
    ],
    cmd: ["python3", "main.py"],
  });
  assert.deepEqual(Image.debian("trixie", { packages: ["cowsay"] }).toSpec(), { base: { debian: "trixie", packages: ["cowsay"] } });
  assert.deepEqual(Image.fromRegistry("127.0.0.1:5000/tools:1", { insecure: true }).toSpec(), { base: { image: "127.0.0.1:5000/tools:1", insecure: true } });
});

test("the builder refuses bad arguments at once, naming them", () => {
  const b = Image.debian();
  assert.throws(() => b.aptInstall(), (e) => e instanceof InvalidArgumentError && /aptInstall/.test(e.message));
  assert.throws(() => b.aptInstall("git", 3), /aptInstall: must be a list of non-empty strings/);
  assert.throws(() => b.runCommands(""), /runCommands/);
  assert.throws(() => b.addLocalDir(".", "relative/path"), /remotePath "relative\/path": must be absolute/);
  assert.throws(() => b.env({ A: 1 }), /env: must be an object of strings/);
  assert.throws(() => b.workdir(""), /workdir/);
  assert.throws(() => Image.debian(""), /suite/);
});

test("a local directory's tar is deterministic, owner- and time-free, readable by tar", async () => {
  const dir = await mkdtemp(join(tmpdir(), "corral-tar-"));
  await mkdir(join(dir, "sub"));
  await writeFile(join(dir, "b.txt"), "bee\n");
  await writeFile(join(dir, "sub", "a.sh"), "#!/bin/sh\necho a\n");
  await chmod(join(dir, "sub", "a.sh"), 0o755);
  const long = "x".repeat(120);
  await writeFile(join(dir, long), "long name\n");
  await symlink("b.txt", join(dir, "link"));
  const first = await tarOf(dir, "/opt/app");
  await utimes(join(dir, "b.txt"), new Date(1e12), new Date(1e12)); // a new time is no change
  const second = await tarOf(dir, "/opt/app");
  assert.equal(sha(first), sha(second));
  await writeFile(join(dir, "b.txt"), "bee!\n"); // new content is
  assert.notEqual(sha(await tarOf(dir, "/opt/app")), sha(first));

  const tarFile = join(dir, "..", `${Date.now()}-${process.pid}.tar`);
  await writeFile(tarFile, first);
  const listing = execFileSync("tar", ["-tvf", tarFile, "--numeric-owner"], { encoding: "utf8" }).trim().split("\n");
  const names = listing.map((l) => l.split(/\s+/).slice(5).join(" "));
  assert.deepEqual(names, ["opt/", "opt/app/", "opt/app/b.txt", "opt/app/link -> b.txt", "opt/app/sub/", "opt/app/sub/a.sh", `opt/app/${long}`]);
  for (const l of listing) assert.match(l, /^\S+ 0\/0 .* 2000-01-01 /, l);
  assert.ok(listing.find((l) => l.endsWith("sub/a.sh")).startsWith("-rwxr-xr-x"));
  const out = execFileSync("tar", ["-xOf", tarFile, `opt/app/${long}`], { encoding: "utf8" });
  assert.equal(out, "long name\n");

  // One file lands at dst, or under a dst that ends in "/".
  const one = join(dir, "b.txt");
  await writeFile(tarFile, await tarOf(one, "/etc/x/"));
  assert.deepEqual(execFileSync("tar", ["-tf", tarFile], { encoding: "utf8" }).trim().split("\n"), ["etc/", "etc/x/", "etc/x/b.txt"]);
  await assert.rejects(tarOf(join(dir, "link"), "/x"), /is a symlink/);
  await assert.rejects(tarOf(join(dir, "missing"), "/x"), /ENOENT/);
});

test("an Image builds on first use with progress, runs, and rebuilds from the cache", { skip, timeout: 600_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "corral-img-"));
  await mkdir(join(dir, "lib"));
  await writeFile(join(dir, "main.py"), "import os\nprint(open('lib/data.txt').read().strip(), os.environ['GREETING'], os.getcwd())\n");
  await writeFile(join(dir, "lib", "data.txt"), `data ${process.pid}-${Date.now()}\n`);
  const define = () => Image.debian()
    .runCommands("mkdir -p /opt/tools", "echo built > /opt/tools/stamp")
    .addLocalDir(dir, "/opt/app")
    .env({ GREETING: "hello" })
    .workdir("/opt/app");

  const img = define();
  const events = [];
  const sb = await newSandbox(t, { image: img, onBuildProgress: (ev) => events.push(ev) });
  assert.ok(events.some((e) => e.type === "layer" && e.status === "uploaded"), JSON.stringify(events));
  assert.ok(events.some((e) => e.type === "step" && e.status === "done" && e.step === 1), JSON.stringify(events));
  assert.ok(events.some((e) => e.type === "done"));
  assert.equal(sb.info.image, img.lastBuild.image.digest);
  const p = await sb.exec(["sh", "-c", "cat /opt/tools/stamp; python3 main.py"]);
  const want = `built\n${(await import("node:fs")).readFileSync(join(dir, "lib", "data.txt"), "utf8").trim()} hello /opt/app\n`;
  assert.equal(await p.stdout.readText(), want);

  // The same Image again: no second build.
  const again = [];
  const sb2 = await newSandbox(t, { image: img, onBuildProgress: (ev) => again.push(ev) });
  assert.deepEqual(again, []);
  assert.equal(sb2.info.image, sb.info.image);

  // A new Image of the same definition: built again, every step cached.
  const copy = define();
  const rebuilt = [];
  const info = await copy.build({ onProgress: (ev) => rebuilt.push(ev) });
  assert.equal(info.digest, sb.info.image);
  assert.deepEqual(copy.lastBuild.cached, copy.lastBuild.steps, JSON.stringify(rebuilt));
  assert.ok(rebuilt.some((e) => e.type === "layer" && e.status === "cached"));
  assert.ok(!rebuilt.some((e) => e.type === "step" && e.status === "running"), JSON.stringify(rebuilt));

  // A failing step is an error naming the build, with the step's output seen.
  const out = [];
  await assert.rejects(Image.debian().runCommands("echo oops-output; exit 3").build({ onProgress: (e) => out.push(e) }), /building the image/);
  assert.ok(out.some((e) => e.type === "output" && /oops-output/.test(e.text)), JSON.stringify(out));
  assert.ok(out.some((e) => e.type === "step" && e.status === "failed" && e.exit_code === 3));
  void Sandbox;
});

async function tarOf(src, dst) {
  const parts = [];
  for await (const c of tarTree(src, dst)) parts.push(c);
  return Buffer.concat(parts);
}

function sha(b) {
  return createHash("sha256").update(b).digest("hex");
}
