// Type definitions of corral-sdk (hand-written; the package is plain ESM).

/** Where the daemon is. Default: CORRAL_URL (else http://127.0.0.1:7070) and CORRAL_TOKEN (else the file CORRAL_TOKEN_FILE, else /var/lib/corral/token). */
export interface ClientOptions {
  url?: string;
  token?: string;
  /** An existing connection (url and token are then ignored). */
  client?: Client;
}

export declare const DEFAULT_URL: string;
export declare const DEFAULT_TOKEN_FILE: string;

/** A connection to a Corral daemon. */
export declare class Client {
  constructor(opts?: { url?: string; token?: string });
  readonly url: string;
  readonly token: string;
  request(
    method: string,
    path: string,
    opts?: { query?: Record<string, unknown>; json?: unknown; body?: RequestInit["body"]; signal?: AbortSignal; headers?: Record<string, string> },
  ): Promise<Response>;
  json<T = any>(method: string, path: string, opts?: { query?: Record<string, unknown>; json?: unknown; body?: RequestInit["body"] }): Promise<T>;
}

export interface NetworkPolicy {
  block_network?: boolean;
  cidr_allowlist?: string[];
  domain_allowlist?: string[];
}

export interface ExposedPort {
  port: number;
  public?: boolean;
  url?: string;
}

/** A sandbox's record, as the API reports it (snake_case, as on the wire). */
export interface SandboxInfo {
  id: string;
  name?: string;
  state: "creating" | "running" | "paused" | "stopping" | "stopped" | "failed" | string;
  runtime: "gvisor" | "vm" | string;
  image: string;
  cpu: number;
  cpu_limit: number;
  memory_mb: number;
  memory_limit_mb: number;
  disk_mb: number;
  timeout: number;
  idle_timeout?: number;
  env?: Record<string, string>;
  workdir?: string;
  user?: string;
  tags?: Record<string, string>;
  entrypoint?: string[];
  network: NetworkPolicy;
  address?: string;
  gateway?: string;
  ports?: ExposedPort[];
  port_token?: string;
  envd_access_token?: string;
  created_at: string;
  started_at?: string;
  ended_at?: string;
  expires_at?: string;
  exit_code?: number;
  end_reason?: string;
  error?: string;
  agent_version?: string;
  runtime_info?: Record<string, string>;
  from_snapshot?: string;
  volumes?: VolumeMount[];
  /** Secret names (never values). */
  secrets?: string[];
  secret_headers?: SecretHeader[];
  [key: string]: unknown;
}

export interface CreateOptions extends ClientOptions {
  /** An image reference (default: the daemon's base image), or an Image built here on first use. */
  image?: string | Image;
  /** Progress of building `image` when it is an Image that was not built yet. */
  onBuildProgress?: (event: BuildEvent) => void;
  runtime?: "gvisor" | "vm";
  /** Cores: one number (request and limit), or [request, limit]. */
  cpu?: number | [number, number];
  /** MiB: one number (request), or [request, limit]. */
  memory?: number | [number, number];
  /** Disk MiB. */
  disk?: number;
  /** Lifetime in seconds. */
  timeout?: number;
  idleTimeout?: number;
  workdir?: string;
  user?: string;
  env?: Record<string, string>;
  /** Unique among live sandboxes. */
  name?: string;
  tags?: Record<string, string>;
  blockNetwork?: boolean;
  cidrAllowlist?: string[];
  domainAllowlist?: string[];
  /** Ports reachable through the daemon. */
  expose?: Array<number | { port: number; public?: boolean }>;
  /** Start as a copy of this memory snapshot (id or name). */
  fromSnapshot?: string;
  /** Named volumes to mount: {"/data": "myvol" or a Volume}, or mounts such as vol.mount("/data", {readOnly: true}). */
  volumes?: Record<string, string | Volume> | VolumeMount[];
  /** The sandbox's entrypoint (default: it idles until its timeout). */
  cmd?: string[];
  /** Stored secrets (names or Secrets) whose keys and values every process gets as env. */
  secrets?: Array<string | Secret>;
  /** Egress header rules (secret.header(...)): the proxy sets header on requests to host from a secret; the sandbox never holds it. */
  secretHeaders?: SecretHeader[];
}

export interface ExecOptions {
  workdir?: string;
  env?: Record<string, string>;
  user?: string;
  /** Seconds; then the process is killed and exit.timedOut is true. */
  timeout?: number;
  /** A terminal: true (80x24) or a size; its output comes on stdout. */
  pty?: boolean | { cols: number; rows: number };
  /** Open stdin (default true); false gives the process an empty one. */
  stdin?: boolean;
  /** Timeout, kill and disconnect reach every descendant. */
  killTree?: boolean;
  /** Stored secrets (names or Secrets) whose keys and values the process gets as env. */
  secrets?: Array<string | Secret>;
}

export interface ExitInfo {
  exitCode: number;
  signal?: string;
  timedOut: boolean;
  oomKilled: boolean;
  error?: string;
}

/** One output of a process. Iterating it yields lines (without "\n") as they arrive; read it once. */
export declare class OutputStream implements AsyncIterable<string> {
  [Symbol.asyncIterator](): AsyncIterator<string>;
  lines(): AsyncGenerator<string>;
  text(): AsyncGenerator<string>;
  chunks(): AsyncGenerator<Uint8Array>;
  readText(): Promise<string>;
  readBytes(): Promise<Uint8Array>;
}

export declare class StdinWriter {
  /** Resolves once the daemon took the data; writes go in order. */
  write(data: string | Uint8Array): Promise<void>;
  /** Closes stdin after what was written. */
  end(): Promise<void>;
}

/** A process started by Sandbox.exec. */
export declare class ContainerProcess {
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  readonly stdin: StdinWriter;
  /** The exit code once it ended, else null. */
  readonly returncode: number | null;
  readonly exit: ExitInfo | null;
  /** The pid inside the sandbox, once started. */
  readonly pid: number;
  /** Waits for the end; the exit code. */
  wait(): Promise<number>;
  poll(): number | null;
  /** Signals the process group (default KILL). */
  kill(signal?: string): Promise<void>;
  resize(cols: number, rows: number): Promise<void>;
}

export interface FileEntry {
  name: string;
  path: string;
  type: "file" | "dir" | "symlink" | string;
  size: number;
  mode: number;
  permissions: string;
  owner?: string;
  group?: string;
  modified_at: string;
  symlink_target?: string;
}

export type WriteData = string | Uint8Array | ArrayBuffer | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

export declare class SandboxFiles {
  read(path: string, opts?: { user?: string }): Promise<Uint8Array>;
  readText(path: string, opts?: { user?: string }): Promise<string>;
  /** Streams the file as it is read (for large files). */
  readStream(path: string, opts?: { user?: string }): Promise<ReadableStream<Uint8Array>>;
  /** Streams are sent as they are read, never held whole. */
  write(path: string, data: WriteData, opts?: { mode?: number | string; user?: string }): Promise<FileEntry>;
  /** Copies a local file in, streamed. */
  copyFromLocal(localPath: string, remotePath: string, opts?: { mode?: number | string; user?: string }): Promise<FileEntry>;
  /** Copies a file out to a local path, streamed; the local file appears whole or not at all. */
  copyToLocal(remotePath: string, localPath: string, opts?: { user?: string }): Promise<void>;
  list(path: string, opts?: { depth?: number; user?: string }): Promise<FileEntry[]>;
  stat(path: string, opts?: { user?: string }): Promise<FileEntry>;
  exists(path: string): Promise<boolean>;
  mkdir(path: string, opts?: { mode?: number; user?: string }): Promise<FileEntry>;
  remove(path: string, opts?: { user?: string }): Promise<void>;
  rename(from: string, to: string, opts?: { user?: string }): Promise<FileEntry>;
  /** Watches a directory; iterate the result for its events. */
  watch(path: string, opts?: { recursive?: boolean; user?: string }): FileWatch;
}

/** One change in a watched directory (keepalives are not yielded). */
export interface WatchEvent {
  type: "create" | "write" | "remove" | "rename" | "chmod" | "overflow" | "end" | string;
  /** The entry's absolute path inside the sandbox. */
  path: string;
  /** The path relative to the watched directory. */
  name?: string;
  dir?: boolean;
  /** overflow: how many events were lost (0: unknown). */
  dropped?: number;
  /** overflow and end: why. */
  error?: string;
}

/**
 * A directory watch: `for await (const ev of sb.files.watch(dir))`. Iteration
 * ends after the `end` event, on close(), or when the loop breaks (which closes it).
 */
export declare class FileWatch implements AsyncIterable<WatchEvent> {
  /** Resolves once the watch is set up (every later change is reported); rejects if it cannot start. */
  readonly ready: Promise<void>;
  /** The watched directory. */
  readonly path: string;
  /** Stops the watch. */
  close(): void;
  [Symbol.asyncIterator](): AsyncGenerator<WatchEvent>;
}

/** A sandbox's file opened by Sandbox.open; writes stream out, the file is replaced when closed. */
export declare class SandboxFile implements AsyncIterable<Uint8Array> {
  readonly path: string;
  readonly mode: string;
  /** Resolves once the data is on its way (write and append modes). */
  write(data: string | Uint8Array): Promise<void>;
  /** Everything left to read (read mode). */
  read(): Promise<Uint8Array>;
  readText(): Promise<string>;
  [Symbol.asyncIterator](): AsyncGenerator<Uint8Array>;
  /** Writing: replaces the file now and resolves with its entry. */
  close(): Promise<FileEntry | undefined>;
}

/** An exposed port, reached through the daemon. */
export declare class Tunnel {
  readonly port: number;
  readonly public: boolean;
  /** The port's HTTP URL (its root), the token included unless public. */
  readonly url: string;
  /** The URL without a token. */
  readonly baseUrl: string;
  /** The sandbox's port token ("" for a public port). */
  readonly token: string;
  /** The URL of a path on the port, the token included unless public. */
  urlOf(path?: string): string;
  /** fetch() of a path on the port, the token sent as a header. */
  fetch(path?: string, init?: RequestInit): Promise<Response>;
  /** A raw TCP stream to the port. */
  connect(): Promise<import("node:net").Socket>;
}

export interface PipOptions {
  indexUrl?: string;
  extraIndexUrl?: string[];
  findLinks?: string[];
  noIndex?: boolean;
}

/** One step of a build spec: exactly one field is set (as `corral image build` reads it). */
export interface BuildStep {
  apt_install?: string[];
  pip_install?: { packages: string[]; index_url?: string; extra_index_url?: string[]; find_links?: string[]; no_index?: boolean };
  npm_install?: { packages: string[]; registry?: string };
  run?: string[];
  copy?: { src: string; dst: string; layer?: string };
  env?: Record<string, string>;
  workdir?: string;
  user?: string;
}

/** An image recipe, as `corral image build -f` reads it (JSON is YAML). */
export interface BuildSpec {
  base: { debian?: string; packages?: string[]; image?: string; insecure?: boolean };
  steps?: BuildStep[];
  cmd?: string[];
  env?: Record<string, string>;
  workdir?: string;
  user?: string;
  cpu?: number;
  memory_mb?: number;
  step_timeout?: number;
}

/**
 * A build's progress: the daemon's events (step: running, cached, done,
 * failed; output, with its text; done; error) and the SDK's own `layer`
 * events (a copy step's files uploaded, or found on the daemon).
 */
export interface BuildEvent {
  type: "step" | "output" | "done" | "error" | "layer" | string;
  /** 0 is the base; steps count from 1. */
  step: number;
  steps?: number;
  name?: string;
  status?: "running" | "cached" | "done" | "failed" | "uploaded" | string;
  stream?: "stdout" | "stderr";
  /** output: the bytes, base64 (as on the wire). */
  data?: string;
  /** output: the bytes as UTF-8 text. */
  text?: string;
  exit_code?: number;
  seconds?: number;
  layer?: string;
  image?: ImageInfo;
  error?: { code: string; message: string };
  /** layer: names left out (sockets, FIFOs, devices). */
  skipped?: string[];
}

export interface ImageBuildOptions extends ClientOptions {
  /** name:tag for the image (default: untagged). */
  tag?: string;
  /** Run every step, cached or not. */
  noCache?: boolean;
  /** Build even if this Image was built on this daemon before. */
  force?: boolean;
  onProgress?: (event: BuildEvent) => void;
  signal?: AbortSignal;
}

/**
 * An image definition; each method returns a new Image. Built on first use
 * by Sandbox.create({image}) or by build(); each step is cached on the daemon.
 */
export declare class Image {
  static debian(suite?: string, opts?: { packages?: string[] }): Image;
  /** A Corral image (name:tag, sha256:...) or a registry reference. */
  static fromRegistry(ref: string, opts?: { insecure?: boolean }): Image;
  aptInstall(...packages: Array<string | string[]>): Image;
  pipInstall(...args: Array<string | string[] | PipOptions>): Image;
  npmInstall(...packages: Array<string | string[]>): Image;
  runCommands(...commands: Array<string | string[]>): Image;
  /** A local directory (or file) at an absolute remotePath, uploaded as a layer at build. */
  addLocalDir(localPath: string, remotePath: string): Image;
  addLocalFile(localPath: string, remotePath: string): Image;
  env(vars: Record<string, string>): Image;
  workdir(path: string): Image;
  user(user: string): Image;
  cmd(argv: string[]): Image;
  /** The spec `corral image build -f` reads (copy sources as local paths). */
  toSpec(): BuildSpec;
  /** Builds once per daemon (later calls share it); resolves with the image. */
  build(opts?: ImageBuildOptions): Promise<ImageInfo>;
  /** The last build's step count, cached steps and image. */
  readonly lastBuild?: { steps: number; cached: number; image: ImageInfo };
}

export interface SnapshotInfo {
  id: string;
  name?: string;
  sandbox_id: string;
  runtime: string;
  image: string;
  [key: string]: unknown;
}

export interface ImageInfo {
  digest: string;
  tags?: string[];
  layers: string[];
  size: number;
  left_out?: string[];
  left_out_count?: number;
  [key: string]: unknown;
}

export interface WaitResult {
  exit_code: number;
  end_reason: string;
  error?: string;
}

export declare class Sandbox {
  static create(opts?: CreateOptions): Promise<Sandbox>;
  static fromId(id: string, opts?: ClientOptions): Promise<Sandbox>;
  static fromName(name: string, opts?: ClientOptions): Promise<Sandbox>;
  /** Every sandbox (oldest first) whose tags match (a null value: any value). */
  static list(opts?: ClientOptions & { tags?: Record<string, string | null>; states?: string[] }): Promise<Sandbox[]>;

  readonly sandboxId: string;
  /** The record as last fetched or returned. */
  info: SandboxInfo;
  readonly files: SandboxFiles;

  exec(args: string[], opts?: ExecOptions): Promise<ContainerProcess>;
  refresh(): Promise<SandboxInfo>;
  terminate(): Promise<SandboxInfo>;
  wait(opts?: { timeout?: number }): Promise<WaitResult>;
  poll(): Promise<number | null>;
  setTags(tags: Record<string, string | null>): Promise<SandboxInfo>;
  setTimeout(seconds: number, opts?: { extendOnly?: boolean }): Promise<SandboxInfo>;
  pause(): Promise<SandboxInfo>;
  resume(): Promise<SandboxInfo>;
  /** A memory snapshot; start copies with Sandbox.create({fromSnapshot}). */
  snapshot(opts?: { name?: string }): Promise<SnapshotInfo>;
  snapshotFilesystem(opts?: { tag?: string }): Promise<ImageInfo>;
  fork(count?: number): Promise<Sandbox[]>;
  /** Opens a file: "r"/"rb" reads, "w"/"wb" replaces on close, "a"/"ab" appends on close. */
  open(path: string, mode?: "r" | "rb" | "w" | "wb" | "a" | "ab", opts?: { user?: string }): Promise<SandboxFile>;
  /** The exposed ports (create's `expose`), by port. */
  tunnels(): Promise<Record<number, Tunnel>>;
  /** One exposed port; NotFoundError if it is not exposed. */
  tunnel(port: number): Promise<Tunnel>;
}

/** A named volume mounted into a sandbox. */
export interface VolumeMount {
  name: string;
  path: string;
  read_only?: boolean;
}

/** What the daemon reports about a volume. */
export interface VolumeInfo {
  name: string;
  size_gib: number;
  created_at: string;
  /** The live sandboxes that mount it. */
  mounted_by: string[];
  /** Absent while a vm sandbox holds it. */
  used_bytes?: number;
  size_bytes?: number;
}

/** A named, size-limited store of files that outlives sandboxes; its files are read and written here too. */
export declare class Volume {
  static create(name: string, opts?: ClientOptions & { sizeGiB?: number }): Promise<Volume>;
  /** NotFoundError unless createIfMissing. */
  static fromName(name: string, opts?: ClientOptions & { createIfMissing?: boolean; sizeGiB?: number }): Promise<Volume>;
  static list(opts?: ClientOptions): Promise<Volume[]>;

  readonly name: string;
  info: VolumeInfo;
  readonly sizeGiB: number;
  readonly mountedBy: string[];

  refresh(): Promise<VolumeInfo>;
  /** ConflictError while mounted, unless force (which terminates the sandboxes that mount it). */
  remove(opts?: { force?: boolean }): Promise<void>;
  mount(path: string, opts?: { readOnly?: boolean }): VolumeMount;
  read(path: string): Promise<Uint8Array>;
  readText(path: string): Promise<string>;
  write(path: string, data: WriteData, opts?: { mode?: number | string }): Promise<FileEntry>;
  list(path?: string): Promise<FileEntry[]>;
}

/** An egress header rule: requests to host get header set from a secret's key. */
/** An egress header rule: TLS requests to host (port 443; GET, HEAD, POST,
 * PUT, PATCH, DELETE, OPTIONS; never plain HTTP, never TRACE) get header set
 * from the secret's key. */
export interface SecretHeader {
  secret: string;
  key: string;
  host: string;
  header: string;
  /** "{value}" is replaced by the value (default: the value alone). */
  template?: string;
}

/** What the daemon reports about a secret: never a value. */
export interface SecretInfo {
  name: string;
  keys: string[];
  created_at: string;
  updated_at: string;
}

/** Named credentials kept encrypted by the daemon; no call returns a value. */
export declare class Secret {
  static create(name: string, values: Record<string, string>, opts?: ClientOptions): Promise<Secret>;
  static fromName(name: string, opts?: ClientOptions): Promise<Secret>;
  static list(opts?: ClientOptions): Promise<Secret[]>;

  readonly name: string;
  info: SecretInfo;
  readonly keys: string[];

  /** Replaces all values; running sandboxes keep their env, header injection uses the new ones. */
  rotate(values: Record<string, string>): Promise<Secret>;
  remove(): Promise<void>;
  header(key: string, host: string, opts?: { header?: string; template?: string }): SecretHeader;
}

/** Every error the SDK throws. */
export declare class CorralError extends Error {
  constructor(message: string, opts?: { code?: string; status?: number; cause?: unknown });
  /** The API's code (not_found, invalid_argument, ...) or the SDK's own. */
  readonly code: string;
  /** The HTTP status, 0 when none came. */
  readonly status: number;
}
export declare class NotFoundError extends CorralError {}
export declare class InvalidArgumentError extends CorralError {}
export declare class NotSupportedError extends InvalidArgumentError {}
export declare class ConflictError extends CorralError {}
export declare class ResourceExhaustedError extends CorralError {}
export declare class AuthenticationError extends CorralError {}
export declare class DeadlineExceededError extends CorralError {}
export declare class ConnectionError extends CorralError {}
