// A usage sample of corral-sdk checked by tsc --strict (never run): every
// public name the README and the tests use, in the way a program uses it.
// The @ts-expect-error lines check that wrong uses are refused.
import {
  Sandbox, Image, Client, Tunnel, FileWatch, CorralError, NotFoundError, InvalidArgumentError, Volume, Secret,
  type BuildEvent, type VolumeInfo, type VolumeMount, type SecretHeader, type WatchEvent, type SandboxInfo, type ImageInfo, type FileEntry, type ExitInfo,
} from "../index.js";

export async function sample(): Promise<void> {
  const image = Image.debian()
    .aptInstall("git")
    .pipInstall("requests", { indexUrl: "http://127.0.0.1:1/simple", noIndex: true })
    .runCommands("echo one", "echo two")
    .addLocalDir("./app", "/opt/app")
    .env({ A: "b" })
    .workdir("/opt/app")
    .user("nobody")
    .cmd(["python3", "main.py"]);
  const steps: number = image.toSpec().steps?.length ?? 0;
  const built: ImageInfo = await image.build({ tag: "app:1", onProgress: (ev: BuildEvent) => void ev.status });
  void [steps, built.digest, image.lastBuild?.cached];

  const client = new Client({ url: "http://127.0.0.1:7070", token: "t" });
  const sb = await Sandbox.create({
    client, image, onBuildProgress: (ev) => void ev.text, runtime: "gvisor", cpu: [0.5, 1], memory: 256,
    timeout: 600, idleTimeout: 60, workdir: "/tmp", env: { X: "y" }, name: "n", tags: { a: "b" },
    blockNetwork: false, cidrAllowlist: ["198.51.100.0/24"], domainAllowlist: ["example.com"],
    expose: [8000, { port: 8001, public: true }], cmd: ["sleep", "infinity"],
  });
  // @ts-expect-error runtime is gvisor or vm
  await Sandbox.create({ runtime: "docker" });
  const info: SandboxInfo = sb.info;
  void info.state;

  const p = await sb.exec(["python3", "-c", "print(1)"], { workdir: "/", env: {}, user: "root", timeout: 5, pty: { cols: 80, rows: 24 } });
  for await (const line of p.stdout) void line.toUpperCase();
  await p.stdin.write("x");
  await p.stdin.end();
  const code: number = await p.wait();
  const exit: ExitInfo | null = p.exit;
  void [code, exit?.timedOut, p.poll(), await p.stderr.readText()];
  // @ts-expect-error exec takes an argv array
  await sb.exec("echo hi");

  const e: FileEntry = await sb.files.write("/tmp/a", "text", { mode: 0o644 });
  const bytes: Uint8Array = await sb.files.read("/tmp/a");
  const text: string = await sb.files.readText("/tmp/a");
  await sb.files.copyFromLocal("./local.txt", "/tmp/b");
  await sb.files.copyToLocal("/tmp/b", "./back.txt");
  const entries: FileEntry[] = await sb.files.list("/tmp", { depth: 2 });
  void [e.size, bytes.length, text, entries, await sb.files.exists("/tmp"), await sb.files.stat("/tmp")];
  await sb.files.mkdir("/tmp/d");
  await sb.files.rename("/tmp/d", "/tmp/e");
  await sb.files.remove("/tmp/e");

  const f = await sb.open("/tmp/log", "a");
  await f.write("line\n");
  const written: FileEntry | undefined = await f.close();
  const r = await sb.open("/tmp/log");
  for await (const chunk of r) void chunk.byteLength;
  void [written?.size, await (await sb.open("/tmp/log", "rb")).readText()];
  // @ts-expect-error modes are r, rb, w, wb, a, ab
  await sb.open("/tmp/log", "rw");

  const watch: FileWatch = sb.files.watch("/tmp", { recursive: true });
  await watch.ready;
  for await (const ev of watch) {
    const w: WatchEvent = ev;
    if (w.type === "end") break;
  }
  watch.close();

  const tunnels: Record<number, Tunnel> = await sb.tunnels();
  const t: Tunnel = await sb.tunnel(8000);
  const resp: Response = await t.fetch("/index.html");
  const sock = await t.connect();
  sock.end("GET / HTTP/1.0\r\n\r\n");
  void [tunnels[8001]?.url, t.urlOf("/x"), resp.status];

  await sb.setTags({ a: null });
  await sb.setTimeout(60, { extendOnly: true });
  await sb.pause();
  await sb.resume();
  const snap = await sb.snapshot({ name: "s" });
  const copy = await Sandbox.create({ fromSnapshot: snap.id });
  const img = await sb.snapshotFilesystem({ tag: "t:1" });
  const forks: Sandbox[] = await sb.fork(2);
  void [copy.sandboxId, img.digest, forks.length, await sb.poll(), await sb.refresh()];
  await sb.terminate();
  const end = await sb.wait({ timeout: 10 });
  void end.exit_code;

  const vol: Volume = await Volume.fromName("data", { createIfMissing: true, sizeGiB: 2 });
  await vol.write("/in.txt", "x", { mode: 0o600 });
  const vinfo: VolumeInfo = await vol.refresh();
  const ro: VolumeMount = vol.mount("/ro", { readOnly: true });
  const sec = await Secret.create("api", { TOKEN: "t" });
  const rule: SecretHeader = sec.header("TOKEN", "api.example.com", { template: "Bearer {value}" });
  const withData = await Sandbox.create({ volumes: { "/data": vol, "/other": "other" }, secrets: [sec, "db"], secretHeaders: [rule] });
  await Sandbox.create({ volumes: [ro, { name: "data", path: "/d" }] });
  await withData.exec(["env"], { secrets: [sec] });
  void [vinfo.mounted_by, vol.mountedBy, await vol.readText("/in.txt"), await vol.list(), sec.keys, (await Secret.list()).length,
    (await Volume.list()).length, withData.info.volumes, await Volume.create("v2", { sizeGiB: 1 }), await Secret.fromName("api")];
  await sec.rotate({ TOKEN: "u" });
  await sec.remove();
  await vol.remove({ force: true });
  // @ts-expect-error secret values are strings
  await Secret.create("bad", { N: 1 });

  const all: Sandbox[] = await Sandbox.list({ tags: { a: null }, states: ["running"] });
  void [all, await Sandbox.fromId("sb-x"), await Sandbox.fromName("n")];

  try {
    await Sandbox.fromId("nope");
  } catch (err) {
    if (err instanceof NotFoundError) void err.status;
    else if (err instanceof InvalidArgumentError) void err.code;
    else if (err instanceof CorralError) void err.message;
  }
}
