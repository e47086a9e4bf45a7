// Package e2b serves E2B's control API (E2B's spec/openapi.yml: create,
// connect, list, kill, timeout, pause, resume, metrics, snapshots, network)
// under the path prefix /e2b of the daemon's API listener, so that the
// official E2B SDKs run unchanged against Corral with
// E2B_API_URL=http://HOST:PORT/e2b and E2B_API_KEY=e2b_<daemon token>.
//
// It is a face, like internal/api: it translates E2B's requests into
// calls on the manager (and the image builder, for the "base" template)
// and their errors, once, here, into E2B's {"code", "message"} shape. It
// never reaches an agent client or the records directly. It imports the
// manager, the builder and the contracts (sandbox, errdefs, policy);
// only internal/daemon imports it. The envd face (processes and files
// over Connect RPC) is internal/e2b/envd's, on its own listener.
package e2b

// EnvdVersion is the envd version the create and connect responses
// report: the SDK gates features on it (e2b 2.51.0: 0.1.0 to run at all,
// 0.1.4 recursive watch, 0.1.5 metrics, 0.3.0 stdin:false, 0.4.0 no
// default user "user", 0.5.2 closeStdin, 0.5.7 octet-stream upload,
// 0.6.2 file metadata, 0.6.3 watch events with entries, 0.6.4 watchDir's
// allowNetworkMounts), so it must be no higher than what the envd face
// implements (envd.Version).
const EnvdVersion = "0.6.4"
