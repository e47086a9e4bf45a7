// Package agentapi is the versioned protocol between the Corral daemon and
// the guest agent (PID 1 inside every sandbox): the wire types, the paths,
// and the daemon-side Client. docs/AGENT_PROTOCOL.md is its specification.
//
// The protocol is HTTP/2 with prior knowledge over one byte stream. GET
// /version is frozen forever; every other path is prefixed with /v<N> for the
// protocol version N that both sides chose. Images and memory snapshots
// freeze an agent binary, so a type here never changes meaning within a
// version: add fields, never repurpose them.
//
// This package imports only errdefs and the standard library (its HTTP/2 is
// net/http's own).
package agentapi

import "time"

// ProtocolVersion is the newest protocol version this package speaks.
const ProtocolVersion = 5

// SupportedVersions lists every protocol version this package speaks, newest
// last. Both the agent (in GET /version) and the client use it.
//
// 1: processes, files, ports, snapshots' session end and identity.
// 2: all of 1, and file watching (GET /v2/fs/watch).
// 3: all of 2, and StartRequest.KillTree (a timeout or signal kills every
// descendant of the process, setsid'd ones too) and Event.OOMKilled.
// 4: all of 3, and extended attributes on a write (PUT /files?xattrs=).
// 5: all of 4, and volumes over NFS (POST /volume/mount, /volume/relay).
var SupportedVersions = []int{1, 2, 3, 4, 5}

// WatchSince is the first protocol version with file watching.
const WatchSince = 2

// KillTreeSince is the first protocol version with StartRequest.KillTree
// and Event.OOMKilled. A client refuses KillTree to an older agent (which
// would ignore the field): errdefs.ErrFailedPrecondition.
const KillTreeSince = 3

// XattrsSince is the first protocol version whose file write sets
// extended attributes (the xattrs query of PUT /files, XattrSet). A client
// refuses them to an older agent, which would ignore the query:
// errdefs.ErrNotSupported.
const XattrsSince = 4

// VolumeNFSSince is the first protocol version whose agent mounts a
// volume over NFS relayed from the daemon (VolumeMount, AcceptVolumeNFS).
// A client refuses them to an older agent: errdefs.ErrNotSupported.
const VolumeNFSSince = 5

// AgentVersion is the agent's release string reported in GET /version.
const AgentVersion = "corral-agent 0.5.0"

// Paths. PathVersion is unversioned; the others follow the /v<N> prefix.
const (
	PathVersion       = "/version"
	PathHealth        = "/health"
	PathStart         = "/process/start"
	PathConnect       = "/process/connect"
	PathList          = "/process/list"
	PathStdin         = "/process/stdin"
	PathCloseStdin    = "/process/close-stdin"
	PathSignal        = "/process/signal"
	PathResize        = "/process/resize"
	PathFiles         = "/files"
	PathStat          = "/fs/stat"
	PathListDir       = "/fs/list"
	PathMakeDir       = "/fs/mkdir"
	PathRemove        = "/fs/remove"
	PathRename        = "/fs/rename"
	PathChmod         = "/fs/chmod"
	PathPortConnect   = "/port/connect"
	PathExportUpper   = "/fs/export-upper"
	PathEndSession    = "/session/end"
	PathIdentity      = "/identity"
	PathWatch         = "/fs/watch"     // since WatchSince
	PathVolumeMount   = "/volume/mount" // since VolumeNFSSince
	PathVolumeRelay   = "/volume/relay" // since VolumeNFSSince
	ContentTypeNDJSON = "application/x-ndjson"
)

// Bounds shared by both sides.
const (
	// MaxJSONBody is the largest JSON request body the agent accepts.
	MaxJSONBody = 1 << 20
	// MaxChunk is the largest output chunk in one event.
	MaxChunk = 32 << 10
	// MaxEventLine bounds one NDJSON line (a base64 MaxChunk plus framing).
	MaxEventLine = 256 << 10
	// MaxListDepth is the deepest ListDir recursion.
	MaxListDepth = 16
	// KeepaliveInterval is the silence after which a stream sends a keepalive.
	KeepaliveInterval = 15 * time.Second
)

// Event types on a process stream.
const (
	EventStart     = "start"
	EventStdout    = "stdout"
	EventStderr    = "stderr"
	EventPTY       = "pty"
	EventEnd       = "end"
	EventKeepalive = "keepalive"
)

// ExitCodeTimeout is the exit code reported when the per-process timeout
// fired, as timeout(1) does.
const ExitCodeTimeout = 124

// VersionInfo is the body of GET /version.
type VersionInfo struct {
	Protocols []int  `json:"protocols"`
	Agent     string `json:"agent"`
}

// HealthInfo is the body of GET /v1/health.
type HealthInfo struct {
	OK       bool  `json:"ok"`
	UptimeMS int64 `json:"uptime_ms"`
}

// PTYSize is a terminal size in character cells.
type PTYSize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// StartRequest is the body of POST /v1/process/start.
type StartRequest struct {
	// Args is the argv; Args[0] is looked up in PATH.
	Args []string `json:"args"`
	// Env is merged over the agent's environment.
	Env map[string]string `json:"env,omitempty"`
	// Cwd defaults to the user's home directory.
	Cwd string `json:"cwd,omitempty"`
	// User is a name, a uid, or uid:gid; default root.
	User string `json:"user,omitempty"`
	// Stdin gives the process a pipe fed by POST /v1/process/stdin;
	// otherwise its stdin is /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// PTY gives the process a terminal of that size.
	PTY *PTYSize `json:"pty,omitempty"`
	// TimeoutMS, when positive, SIGKILLs the process group after that long
	// (with KillTree: every descendant).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// KillTree (since KillTreeSince): the timeout and a signal sent
	// through POST /process/signal reach every descendant the process
	// started, including those in a session of their own (setsid) or
	// orphaned to PID 1, not only its process group.
	KillTree bool `json:"kill_tree,omitempty"`
	// Tag optionally names the process, unique among running processes.
	Tag string `json:"tag,omitempty"`
	// Log copies the output to the sandbox console as well.
	Log bool `json:"log,omitempty"`
}

// ConnectRequest is the body of POST /v1/process/connect: a pid or a tag.
type ConnectRequest struct {
	PID int    `json:"pid,omitempty"`
	Tag string `json:"tag,omitempty"`
}

// PIDRequest is the body of POST /v1/process/close-stdin.
type PIDRequest struct {
	PID int `json:"pid"`
}

// SignalRequest is the body of POST /v1/process/signal.
type SignalRequest struct {
	PID    int `json:"pid"`
	Signal int `json:"signal"`
}

// ResizeRequest is the body of POST /v1/process/resize.
type ResizeRequest struct {
	PID  int    `json:"pid"`
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// Event is one line of a process stream.
type Event struct {
	Type string `json:"type"`
	// PID is set on start events.
	PID int `json:"pid,omitempty"`
	// Data is set on stdout, stderr and pty events (base64 on the wire).
	Data []byte `json:"data,omitempty"`
	// ExitCode, Signal, TimedOut and Error are set on end events.
	ExitCode int    `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// OOMKilled (since KillTreeSince, protocol 3): the process ended by
	// SIGKILL, or with 137, while the sandbox kernel's OOM killer killed
	// a process (its oom_kill count in /proc/vmstat grew while the
	// process ran). Kernels without that count (gVisor) never set it.
	OOMKilled bool   `json:"oom_killed,omitempty"`
	Error     string `json:"error,omitempty"`
}

// ProcessInfo describes a running process in GET /v1/process/list.
type ProcessInfo struct {
	PID       int       `json:"pid"`
	Tag       string    `json:"tag"`
	Args      []string  `json:"args"`
	Cwd       string    `json:"cwd"`
	PTY       bool      `json:"pty"`
	StartedAt time.Time `json:"started_at"`
}

// ProcessList is the body of GET /v1/process/list.
type ProcessList struct {
	Processes []ProcessInfo `json:"processes"`
}

// Entry types in EntryInfo.Type.
const (
	EntryFile    = "file"
	EntryDir     = "dir"
	EntrySymlink = "symlink"
	EntryOther   = "other"
)

// EntryInfo describes a filesystem entry. Path is the path inside the
// sandbox; Mode holds the unix permission bits (07777).
type EntryInfo struct {
	Name          string    `json:"name"`
	Path          string    `json:"path"`
	Type          string    `json:"type"`
	Size          int64     `json:"size"`
	Mode          uint32    `json:"mode"`
	Permissions   string    `json:"permissions"`
	Owner         string    `json:"owner"`
	Group         string    `json:"group"`
	ModifiedAt    time.Time `json:"modified_at"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
	// Xattrs (a write with an XattrSet, since XattrsSince) are the
	// file's attributes under the set's Prefix after the write, read
	// back from the file, names without the prefix.
	Xattrs map[string]string `json:"xattrs,omitempty"`
	// XattrsUnsupported (likewise): the file's filesystem refused
	// extended attributes (ENOTSUP); the body was written all the same.
	XattrsUnsupported bool `json:"xattrs_unsupported,omitempty"`
}

// DirList is the body of GET /v1/fs/list.
type DirList struct {
	Entries []EntryInfo `json:"entries"`
}

// In every file request, User (a name or uid, optionally :group; empty is
// root) is the user whose home a relative path starts at and who owns what
// the request creates. Agents older than the field ignore it: their
// relative paths start at root's home and what they create is root's.

// MakeDirRequest is the body of POST /v1/fs/mkdir.
type MakeDirRequest struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode,omitempty"`
	User string `json:"user,omitempty"`
}

// RemoveRequest is the body of POST /v1/fs/remove.
type RemoveRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
	User      string `json:"user,omitempty"`
}

// RenameRequest is the body of POST /v1/fs/rename.
type RenameRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
	User string `json:"user,omitempty"`
}

// ChmodRequest is the body of POST /v1/fs/chmod.
type ChmodRequest struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
	User string `json:"user,omitempty"`
}

// Files the agent itself writes into a sandbox's root at start, as paths
// inside the sandbox. They describe the sandbox, not its image, so a
// runtime exporting the sandbox's filesystem changes leaves them out.
const (
	ResolvConf     = "/etc/resolv.conf"
	ResolvConfTemp = "/etc/.resolv.conf.corral"
	Hostname       = "/etc/hostname"
	HostnameTemp   = "/etc/.hostname.corral"
	Hosts          = "/etc/hosts"
	HostsTemp      = "/etc/.hosts.corral"
)

// RuntimeWrittenFiles lists those files.
var RuntimeWrittenFiles = []string{ResolvConf, ResolvConfTemp, Hostname, HostnameTemp, Hosts, HostsTemp}

// IdentityRequest is POST /v1/identity: the host gives a sandbox restored
// from a memory snapshot (a fork, a create from a snapshot) an identity of
// its own. Every field is optional; the agent applies those present.
type IdentityRequest struct {
	// Hostname replaces the kernel's hostname (sethostname; a runtime
	// that already set it, as gVisor's restore does, is left alone).
	Hostname string `json:"hostname,omitempty"`
	// MachineID (32 lowercase hex digits) replaces /etc/machine-id.
	MachineID string `json:"machine_id,omitempty"`
	// BootID (a UUID) is shown at /proc/sys/kernel/random/boot_id where
	// the kernel allows a file to be mounted over it (vm).
	BootID string `json:"boot_id,omitempty"`
	// Entropy (MinEntropy..MaxEntropy bytes from the host's RNG) is mixed
	// into the kernel's pool, which is then reseeded, so that copies of one
	// snapshot read different bytes from /dev/urandom.
	Entropy []byte `json:"entropy,omitempty"`
	// Network moves the sandbox's interface to its new address.
	Network *IdentityNetwork `json:"network,omitempty"`
	// Nameservers rewrite /etc/resolv.conf.
	Nameservers []string `json:"nameservers,omitempty"`
}

// IdentityNetwork is a sandbox's interface address and default route.
type IdentityNetwork struct {
	Address string `json:"address"` // CIDR, e.g. 10.88.0.6/30
	Gateway string `json:"gateway"`
}

// Entropy bounds of IdentityRequest.
const (
	MinEntropy = 32
	MaxEntropy = 512
)

// IdentityResult says what the agent changed.
type IdentityResult struct {
	// RNG is "reseeded" (the kernel's pool got the entropy and was
	// reseeded), "mixed" (it got the entropy but refused the reseed),
	// "host" (the kernel's /dev/urandom reads the host's RNG, as gVisor's
	// does: nothing to reseed) or "" (no entropy asked for, or no
	// /dev/urandom).
	RNG     string `json:"rng,omitempty"`
	BootID  bool   `json:"boot_id,omitempty"` // BootID is mounted
	Network bool   `json:"network,omitempty"` // the address changed
}

// XattrSet is a write's extended attributes (since XattrsSince), sent
// JSON-encoded in the xattrs query parameter of PUT /files. After the body
// is written, every attribute of the file whose name starts with Prefix
// and is not named in Values is removed, and each of Values is set as
// Prefix+name: the set replaces what an earlier write left, as E2B's envd
// metadata does (an in-place write keeps a file's attributes). Prefix must
// start with XattrUserPrefix; names are non-empty and NUL-free.
type XattrSet struct {
	Prefix string            `json:"prefix"`
	Values map[string]string `json:"values,omitempty"`
}

// XattrUserPrefix is the only attribute namespace a write may set: the
// user namespace, which needs no privilege and carries no meaning to the
// kernel (security.*, trusted.* and system.* do).
const XattrUserPrefix = "user."

// Bounds of an XattrSet: a whole attribute name (the kernel's
// XATTR_NAME_MAX) and the sum of its names and values (what one ext4
// block holds for an inode's attributes).
const (
	MaxXattrName  = 255
	MaxXattrTotal = 4096
)
