// Package apiv1 holds the wire types of Corral's HTTP API, version 1. It is
// the contract shared by the daemon (internal/api), the Go SDK and the CLI,
// and imports nothing from Corral. docs/openapi.yaml describes the same
// shapes; change both together.
package apiv1

import "time"

// CreateSandboxRequest is the body of POST /v1/sandboxes. Durations are in
// seconds; CPU in cores; memory in MiB. Zero values take the defaults.
type CreateSandboxRequest struct {
	Runtime       string  `json:"runtime,omitempty"`
	Image         string  `json:"image,omitempty"`
	CPU           float64 `json:"cpu,omitempty"`
	CPULimit      float64 `json:"cpu_limit,omitempty"`
	MemoryMB      int64   `json:"memory_mb,omitempty"`
	MemoryLimitMB int64   `json:"memory_limit_mb,omitempty"`
	DiskMB        int64   `json:"disk_mb,omitempty"`
	Timeout       float64 `json:"timeout,omitempty"`
	IdleTimeout   float64 `json:"idle_timeout,omitempty"`
	// AutoPause pauses the sandbox after IdleTimeout instead of ending
	// it; the next API call on it resumes it.
	AutoPause bool `json:"auto_pause,omitempty"`
	// PauseOnTimeout pauses the sandbox when its lifetime ends instead of
	// ending it; a resume gives it a fresh timeout.
	PauseOnTimeout bool `json:"pause_on_timeout,omitempty"`
	// PauseFilesystem makes pause_on_timeout's pause filesystem-only
	// (PauseRequest.KeepMemory false); it goes without auto_resume and
	// auto_pause.
	PauseFilesystem bool `json:"pause_filesystem,omitempty"`
	// AutoResume lets the next API call on the sandbox, paused by
	// pause_on_timeout, resume it.
	AutoResume bool              `json:"auto_resume,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Workdir    string            `json:"workdir,omitempty"`
	User       string            `json:"user,omitempty"`
	Name       string            `json:"name,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Expose     []ExposedPort     `json:"expose,omitempty"`
	// FromSnapshot (a memory snapshot's id or name) starts the sandbox as
	// a copy of the snapshot: its image, runtime and resources are the
	// snapshot's; env, workdir, user, timeouts, network policy and ports
	// too unless set here.
	FromSnapshot string `json:"from_snapshot,omitempty"`
	// CACerts are PEM CA certificates (each one or more CERTIFICATE
	// blocks, at most 32 KiB; at most 16) the sandbox trusts beyond its
	// image's: added to its trust store at start.
	CACerts []string `json:"ca_certs,omitempty"`
	// Volumes are named volumes mounted into the sandbox (at most 16).
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Secrets names stored secrets whose keys and values every process
	// gets as environment variables; the record keeps the names only.
	Secrets []string `json:"secrets,omitempty"`
	// SecretHeaders make the egress proxy set headers from secrets on
	// the sandbox's requests to named hosts; the sandbox never holds the
	// values (it trusts a CA of its own for those hosts' HTTPS).
	SecretHeaders []SecretHeader `json:"secret_headers,omitempty"`
	NetworkPolicy
}

// ExposedPort is a port inside a sandbox reachable through the daemon at
// URL (a path on the daemon's API, for programs) and, for browsers, at
// BrowserURL on the ports origin (a host of its own per sandbox port,
// never the API's or the console's), with the sandbox's port token
// unless Public.
type ExposedPort struct {
	Port       int    `json:"port"`
	Public     bool   `json:"public,omitempty"`
	URL        string `json:"url,omitempty"`
	BrowserURL string `json:"browser_url,omitempty"`
}

// NetworkPolicy is what a sandbox may reach. Empty: the public internet,
// with the host, other sandboxes, link-local and private ranges denied.
type NetworkPolicy struct {
	BlockNetwork    bool     `json:"block_network,omitempty"`
	CIDRAllowlist   []string `json:"cidr_allowlist,omitempty"`
	DomainAllowlist []string `json:"domain_allowlist,omitempty"`
}

// Sandbox is what the API reports about one sandbox.
type Sandbox struct {
	ID             string  `json:"id"`
	Name           string  `json:"name,omitempty"`
	State          string  `json:"state"`
	Runtime        string  `json:"runtime"`
	Image          string  `json:"image"`
	CPU            float64 `json:"cpu"`
	CPULimit       float64 `json:"cpu_limit"`
	MemoryMB       int64   `json:"memory_mb"`
	MemoryLimitMB  int64   `json:"memory_limit_mb"`
	DiskMB         int64   `json:"disk_mb"`
	Timeout        float64 `json:"timeout"`
	IdleTimeout    float64 `json:"idle_timeout,omitempty"`
	AutoPause      bool    `json:"auto_pause,omitempty"`
	PauseOnTimeout bool    `json:"pause_on_timeout,omitempty"`
	// PauseFilesystem: pause_on_timeout pauses filesystem-only.
	PauseFilesystem bool `json:"pause_filesystem,omitempty"`
	AutoResume      bool `json:"auto_resume,omitempty"`
	// PauseKind is how a paused sandbox is paused: "memory" (resume
	// restores its processes) or "filesystem" (resume boots it afresh on
	// the image its files were saved to, which Image names since).
	PauseKind  string            `json:"pause_kind,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Workdir    string            `json:"workdir,omitempty"`
	User       string            `json:"user,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Network    NetworkPolicy     `json:"network"`
	// Secrets and SecretHeaders are the secrets' names and header rules,
	// never their values.
	Secrets       []string       `json:"secrets,omitempty"`
	SecretHeaders []SecretHeader `json:"secret_headers,omitempty"`
	// Address is the sandbox's IPv4 address and Gateway the daemon's side
	// of its link (default route and resolver), while it has a network.
	Address   string        `json:"address,omitempty"`
	Gateway   string        `json:"gateway,omitempty"`
	Ports     []ExposedPort `json:"ports,omitempty"`
	PortToken string        `json:"port_token,omitempty"`
	// EnvdAccessToken opens the sandbox's E2B envd face (X-Access-Token).
	EnvdAccessToken string     `json:"envd_access_token,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	EndedAt         *time.Time `json:"ended_at,omitempty"`
	ExpiresAt       *time.Time `json:"expires_at,omitempty"`
	ExitCode        *int       `json:"exit_code,omitempty"`
	EndReason       string     `json:"end_reason,omitempty"`
	Error           string     `json:"error,omitempty"`
	AgentVersion    string     `json:"agent_version,omitempty"`
	// RuntimeInfo describes the sandbox's machine (vm: accel "kvm" or
	// "tcg", machine, kernel, vcpus, ram_mb, boot_ms).
	RuntimeInfo map[string]string `json:"runtime_info,omitempty"`
	// Usage is what the sandbox used, once it ended (with usage metering
	// on; GET /v1/sandboxes/{id}/usage has it while it lives).
	Usage *Usage `json:"usage,omitempty"`
	// FromSnapshot is the memory snapshot the sandbox started from.
	FromSnapshot string `json:"from_snapshot,omitempty"`
	// Volumes are the named volumes it mounts.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// CreatePhases is how long each step of the create took, in order
	// (the runtime's own steps, "runtime.<step>", lie within "runtime");
	// present while the daemon that created the sandbox runs.
	CreatePhases []Phase `json:"create_phases,omitempty"`
}

// Phase is one timed step of a create.
type Phase struct {
	Name string  `json:"name"`
	MS   float64 `json:"ms"`
}

// SandboxList is the body of GET /v1/sandboxes: a page, oldest first.
// Next, when set, is the token (?next=) of the following page; a page may
// then still hold fewer than the limit.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
	Next      string    `json:"next,omitempty"`
}

// WaitResult is the body of POST /v1/sandboxes/{id}/wait.
type WaitResult struct {
	ExitCode  int    `json:"exit_code"`
	EndReason string `json:"end_reason"`
	// Error says why it ended, in words, when known (an oom's memory
	// limit, a guest's panic message) or why its create failed.
	Error string `json:"error,omitempty"`
}

// ExecRequest is the body of POST /v1/sandboxes/{id}/processes.
type ExecRequest struct {
	Cmd     []string          `json:"cmd"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	User    string            `json:"user,omitempty"`
	Stdin   bool              `json:"stdin,omitempty"`
	PTY     *PTYSize          `json:"pty,omitempty"`
	Timeout float64           `json:"timeout,omitempty"`
	Tag     string            `json:"tag,omitempty"`
	// Background keeps the process running when the caller disconnects
	// from the output stream; otherwise a disconnect kills it.
	Background bool `json:"background,omitempty"`
	// KillTree makes the timeout, a signal and a disconnect's kill reach
	// every descendant of the process, those that left its process group
	// (setsid) included, not only its process group. A sandbox whose
	// agent is older than protocol 3 refuses it (409 failed_precondition).
	KillTree bool `json:"kill_tree,omitempty"`
	// Secrets names stored secrets whose values the process gets as
	// environment variables, over env.
	Secrets []string `json:"secrets,omitempty"`
}

// PTYSize is a terminal size.
type PTYSize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// ExecEvent is one line of the NDJSON stream an exec returns.
type ExecEvent struct {
	Type     string `json:"type"` // start, stdout, stderr, pty, end
	PID      int    `json:"pid,omitempty"`
	Data     []byte `json:"data,omitempty"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// OOMKilled (end events): the process ended killed (SIGKILL or exit
	// 137) while a kernel's OOM killer killed a process of the sandbox
	// for memory; Error then says so with the sandbox's memory limit.
	OOMKilled bool   `json:"oom_killed,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Event types of ExecEvent.
const (
	EventStart  = "start"
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventPTY    = "pty"
	EventEnd    = "end"
)

// Process is a running process, from GET /v1/sandboxes/{id}/processes.
type Process struct {
	PID       int       `json:"pid"`
	Tag       string    `json:"tag,omitempty"`
	Cmd       []string  `json:"cmd"`
	Cwd       string    `json:"cwd,omitempty"`
	PTY       bool      `json:"pty,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// ProcessList is the body of GET /v1/sandboxes/{id}/processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// SignalRequest is the body of POST .../processes/{pid}/signal. Signal is a
// name ("TERM", "SIGKILL") or a number ("9").
type SignalRequest struct {
	Signal string `json:"signal"`
}

// Entry describes a file in a sandbox.
type Entry struct {
	Name          string    `json:"name"`
	Path          string    `json:"path"`
	Type          string    `json:"type"`
	Size          int64     `json:"size"`
	Mode          uint32    `json:"mode"`
	Permissions   string    `json:"permissions"`
	Owner         string    `json:"owner,omitempty"`
	Group         string    `json:"group,omitempty"`
	ModifiedAt    time.Time `json:"modified_at"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
}

// EntryList is the body of GET .../fs/list.
type EntryList struct {
	Entries []Entry `json:"entries"`
}

// PathRequest is the body of fs/mkdir, fs/remove and fs/chmod.
type PathRequest struct {
	Path      string `json:"path"`
	Mode      uint32 `json:"mode,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	// User owns what the call creates, and a relative path with no
	// sandbox workdir starts at its home; empty is the sandbox's user.
	User string `json:"user,omitempty"`
}

// RenameRequest is the body of fs/rename.
type RenameRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
	User string `json:"user,omitempty"`
}

// Event is one entry of a sandbox's event log.
type Event struct {
	Seq     int64             `json:"seq"`
	Time    time.Time         `json:"time"`
	Kind    string            `json:"kind"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// EventList is the body of GET /v1/sandboxes/{id}/events.
type EventList struct {
	Events []Event `json:"events"`
	// Next, when set, is the after= of the next page: this page was full.
	Next int64 `json:"next,omitempty"`
}

// Version is the body of GET /v1/version.
type Version struct {
	Version  string   `json:"version"`
	Runtimes []string `json:"runtimes"`
	// WarmPool sums the warm pools (absent without any); WarmPools
	// details each.
	WarmPool  *WarmPool  `json:"warm_pool,omitempty"`
	WarmPools []WarmPool `json:"warm_pools,omitempty"`
	// Capacity is what sandboxes are admitted against and what the
	// admitted ones reserve.
	Capacity Capacity `json:"capacity"`
}

// Capacity is the host's memory and CPUs for sandboxes (0 where the
// daemon does not check that resource), the overcommit factors, what that
// admits, and what live, starting and warm pool sandboxes reserve (their
// requests: memory_mb and cpu).
type Capacity struct {
	MemoryMB           int64   `json:"memory_mb"`
	CPU                float64 `json:"cpu"`
	MemoryOvercommit   float64 `json:"memory_overcommit"`
	CPUOvercommit      float64 `json:"cpu_overcommit"`
	AdmittableMemoryMB int64   `json:"admittable_memory_mb"`
	AdmittableCPU      float64 `json:"admittable_cpu"`
	ReservedMemoryMB   int64   `json:"reserved_memory_mb"`
	ReservedCPU        float64 `json:"reserved_cpu"`
	Sandboxes          int     `json:"sandboxes"`
	MaxSandboxes       int     `json:"max_sandboxes"`
}

// WarmPool says how many started sandboxes of a spec wait (in a sum, the
// spec fields are empty).
type WarmPool struct {
	Size  int `json:"size"`
	Ready int `json:"ready"`
	// Hits and Misses count the creates that fit the pool and found a
	// sandbox ready, or did not (and started cold), since the daemon
	// started.
	Hits     int64   `json:"hits"`
	Misses   int64   `json:"misses"`
	Runtime  string  `json:"runtime,omitempty"`
	Image    string  `json:"image,omitempty"`
	CPU      float64 `json:"cpu,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	DiskMB   int64   `json:"disk_mb,omitempty"`
}

// Error is the body of every non-2xx response.
type Error struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail names the problem: a stable code and a message naming the field.
// RequestID is the request's id (also its X-Request-Id header), which the
// daemon's log lines about the request carry.
type ErrorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
}

// Image is one image in the daemon's store.
type Image struct {
	Digest  string    `json:"digest"`
	Tags    []string  `json:"tags,omitempty"`
	Layers  []string  `json:"layers"`
	Size    int64     `json:"size"`
	Created time.Time `json:"created"`
	Env     []string  `json:"env,omitempty"`
	Cmd     []string  `json:"cmd,omitempty"`
	Workdir string    `json:"workdir,omitempty"`
	User    string    `json:"user,omitempty"`
	InUse   bool      `json:"in_use"`
	// Nodes are the cluster nodes that hold the image (a control plane's
	// answers only).
	Nodes []string `json:"nodes,omitempty"`
}

// ImageList is the body of GET /v1/images.
type ImageList struct {
	Images []Image `json:"images"`
}

// PullRequest is the body of POST /v1/images/pull.
type PullRequest struct {
	Ref string `json:"ref"`
	// Insecure allows a plain-HTTP registry (loopback registries always may).
	Insecure bool `json:"insecure,omitempty"`
}

// PruneReport is the body of POST /v1/images/prune: what was removed, and
// every image and layer kept with the reason.
type PruneReport struct {
	Images []string    `json:"images"`
	Layers []string    `json:"layers"`
	Bytes  int64       `json:"bytes"`
	Kept   []PruneKept `json:"kept"`
}

// PruneKept is an image or layer a prune kept.
type PruneKept struct {
	Kind   string `json:"kind"`   // "image" or "layer"
	Digest string `json:"digest"` // sha256:...
	// Reason is "tagged", "in_use" (a sandbox or memory snapshot holds
	// the image), "recent" (younger than the grace period that protects
	// builds in progress) or "used" (a layer of a kept image).
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// Until is when a recent item stops being protected by its age.
	Until *time.Time `json:"until,omitempty"`
	// Node is the cluster node that kept it (a control plane's prune).
	Node string `json:"node,omitempty"`
}

// PauseRequest is the optional body of POST /v1/sandboxes/{id}/pause.
type PauseRequest struct {
	// KeepMemory false pauses filesystem-only: the sandbox's root
	// filesystem is saved as an image and the sandbox stops; its
	// processes, memory and connections end, and resume boots it afresh
	// on that image, under the same id, network policy and ports.
	// Absent or true: the whole sandbox is saved, and resume restores it
	// as it was.
	KeepMemory *bool `json:"keep_memory,omitempty"`
}

// SnapshotMemoryRequest is the body of POST
// /v1/sandboxes/{id}/snapshots/memory.
type SnapshotMemoryRequest struct {
	// Name optionally names the snapshot (unique; letters, digits, '_',
	// '.', '-').
	Name string `json:"name,omitempty"`
}

// Snapshot is a memory snapshot: a sandbox's whole state (memory,
// processes, writable layer), from which sandboxes start as copies
// (CreateSandboxRequest.FromSnapshot, fork).
type Snapshot struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	SandboxID string `json:"sandbox_id"`
	Runtime   string `json:"runtime"`
	// RuntimeVersion is the version of the runtime that saved it; only
	// the same version restores it.
	RuntimeVersion string `json:"runtime_version"`
	// AgentProtocol and AgentVersion describe the agent frozen inside.
	AgentProtocol int       `json:"agent_protocol"`
	AgentVersion  string    `json:"agent_version"`
	Image         string    `json:"image"`
	CPU           float64   `json:"cpu"`
	MemoryMB      int64     `json:"memory_mb"`
	DiskMB        int64     `json:"disk_mb"`
	SizeBytes     int64     `json:"size_bytes"`
	CreatedAt     time.Time `json:"created_at"`
}

// SnapshotList is the body of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// ForkRequest is the body of POST /v1/sandboxes/{id}/fork.
type ForkRequest struct {
	// Count is how many copies (1 to 100).
	Count int `json:"count"`
}

// ForkResult is the answer to a fork: the copies, each with its own id,
// hostname, addresses and randomness.
type ForkResult struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}
