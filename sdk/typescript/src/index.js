// corral-sdk: Corral sandboxes from JavaScript and TypeScript.
export { Sandbox } from "./sandbox.js";
export { ContainerProcess, StdinWriter } from "./process.js";
export { OutputStream } from "./stream.js";
export { SandboxFiles } from "./files.js";
export { Client, DEFAULT_URL, DEFAULT_TOKEN_FILE } from "./client.js";
export {
  CorralError,
  NotFoundError,
  InvalidArgumentError,
  NotSupportedError,
  ConflictError,
  ResourceExhaustedError,
  AuthenticationError,
  DeadlineExceededError,
  ConnectionError,
} from "./errors.js";
export { Image } from "./image.js";
export { FileWatch } from "./watch.js";
export { Tunnel } from "./tunnel.js";
export { SandboxFile } from "./open.js";
export { Volume } from "./volume.js";
export { Secret } from "./secret.js";
