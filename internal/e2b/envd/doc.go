// Package envd is the E2B envd face of Corral: the in-sandbox API an E2B
// client (the e2b SDKs) talks to, served by the daemon on its own listener
// and translated to the manager's services. It owns the routing of a
// request to a sandbox (E2b-Sandbox-Id / E2b-Sandbox-Port headers, or a
// Host of <port>-<id>.<domain>), the envd access token check, the Connect
// RPC services process.Process and filesystem.Filesystem, and the /files
// HTTP endpoints with their signed URLs.
//
// It reaches sandboxes only through internal/manager (never an agent
// client or the records directly), and imports no runtime backend and no
// other face.
package envd
