// Package runtime defines the contract between the sandbox manager and the
// isolation backends (gvisor now; vm later). It imports no backend; backends
// import it.
//
// Vocabulary. A runtime starts one isolated computer per sandbox id. The
// computer's first process (PID 1) is the command in StartParams.Args,
// normally the Corral guest agent. The runtime provides a byte stream to that
// agent (Dial); everything else (exec, files) goes through the agent.
//
// Lifecycle. Start creates every host resource a sandbox needs (bundle,
// cgroup, writable layer, runtime process) and either returns nil with the
// sandbox running, or undoes all of it and returns an error. Destroy kills
// everything in the sandbox and removes every host resource it had; it is
// idempotent and works from a Ref alone, so it can run after a daemon
// restart. Status reports what actually runs, for reconciliation.
//
// Optional abilities (pause, memory snapshot) are separate interfaces that
// a runtime may implement; callers type-assert and otherwise return
// errdefs.ErrNotSupported.
package runtime

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/ids"
)

// Ref names a sandbox to its runtime: the id and the per-sandbox host
// directory the runtime owns exclusively (bundle, sockets, writable layer).
type Ref struct {
	ID  string
	Dir string
}

// Check rejects a Ref no backend may act on: an id that is not a sandbox
// id (ids.Sandbox: it ends up in paths, cgroup names and command lines) or
// a directory that is not an absolute, clean path below "/". Every backend
// method that takes a Ref calls it first.
func (r Ref) Check() error {
	if err := ids.CheckSandbox(r.ID); err != nil {
		return err
	}
	if !filepath.IsAbs(r.Dir) || filepath.Clean(r.Dir) != r.Dir || r.Dir == "/" {
		return errdefs.Invalid("dir", "%q is not an absolute, clean sandbox directory", r.Dir)
	}
	return nil
}

// Resources are the limits of one sandbox. Zero means "no limit" for the
// limits and "default weight" for the requests.
type Resources struct {
	CPURequestMilli int64 // guaranteed share, in 1/1000 cores (cgroup weight)
	CPULimitMilli   int64 // burst ceiling, in 1/1000 cores (cgroup quota)
	MemoryRequestMB int64 // soft limit / reservation, MiB
	MemoryLimitMB   int64 // hard limit, MiB; the sandbox is OOM-killed above it
	PidsLimit       int64 // maximum number of tasks
	DiskMB          int64 // size of the private writable layer, MiB
}

// StartParams describe a sandbox to start.
type StartParams struct {
	Ref
	// RootFS is a host directory holding the image's root filesystem. It is
	// shared between sandboxes and must never be written: each sandbox gets
	// a private writable layer on top, discarded by Destroy.
	RootFS string
	// AgentBinary is the host path of the static corral binary. The runtime
	// makes it available inside the sandbox and runs it as PID 1 as
	// "corral agent" with the channel flags the runtime needs (a unix socket
	// for gvisor, a virtio-serial port for vm).
	AgentBinary string
	// Env is PID 1's environment (the agent passes it on to processes).
	Env       []string
	Resources Resources
	// Hostname of the sandbox.
	Hostname string
	// NetnsPath is the network namespace the sandbox joins, prepared by
	// the network layer (netpolicy) with the sandbox's interface, address
	// and routes. Empty: the sandbox has no network at all.
	NetnsPath string
	// Nameservers the sandbox's /etc/resolv.conf should name (the daemon's
	// resolver on the sandbox's gateway); empty leaves the file alone.
	Nameservers []string
	// Volumes are named volumes to mount into the sandbox.
	Volumes []Volume
	// Trace, if set, is told how long each of the start's own steps took
	// (for corral bench --breakdown); step names are short and stable
	// ("create", "start", "boot").
	Trace func(step string, took time.Duration)
}

// Volume is one volume a sandbox mounts at GuestPath (absolute, clean,
// validated by the caller). gvisor bind-mounts HostDir (the volume's file
// system, mounted on the host); vm only loads its NFS client for it (the
// manager serves HostDir to the guest's agent once it answers).
type Volume struct {
	Name      string
	HostDir   string
	GuestPath string
	ReadOnly  bool
}

// Steps returns a function that tells trace (if not nil) the time since
// its previous call, or since Steps, as the named step: how a backend
// reports StartParams.Trace.
func Steps(trace func(string, time.Duration)) func(string) {
	last := time.Now()
	return func(name string) {
		now := time.Now()
		if trace != nil {
			trace(name, now.Sub(last))
		}
		last = now
	}
}

// State is what a runtime reports about a sandbox.
type State string

const (
	StateRunning State = "running" // PID 1 is alive
	StateStopped State = "stopped" // known to the runtime, PID 1 gone
	StateAbsent  State = "absent"  // the runtime knows nothing of it
	StatePaused  State = "paused"  // saved to disk by Pause; Resume brings it back
)

// Runtime is the contract every isolation backend implements.
type Runtime interface {
	// Name is the runtime's API name ("gvisor", "vm").
	Name() string
	// Start creates and starts a sandbox; on error nothing is left behind.
	Start(ctx context.Context, p StartParams) error
	// Dial opens the byte stream to the sandbox's agent. It may be called
	// again after a daemon restart while the sandbox keeps running.
	Dial(ctx context.Context, ref Ref) (net.Conn, error)
	// Status reports what runs for ref.
	Status(ctx context.Context, ref Ref) (State, error)
	// Destroy kills everything in the sandbox and removes all its host
	// resources. Idempotent; a missing sandbox is not an error.
	Destroy(ctx context.Context, ref Ref) error
	// List returns the ids of every sandbox this runtime has on the host,
	// so the daemon can find ones it has no record of.
	List(ctx context.Context) ([]string, error)
}

// ChangeExporter is a runtime that can write what a running sandbox changed
// in its root filesystem (its private writable layer) as an OCI layer tar:
// the image builder's step result and a filesystem snapshot. agent is the
// sandbox's connected agent, for runtimes whose writable layer only the
// guest can read (vm).
type ChangeExporter interface {
	ExportChanges(ctx context.Context, ref Ref, agent *agentapi.Client, w io.Writer) (ExportStats, error)
}

// ExportStats describes an export.
type ExportStats struct {
	Entries int
	// Skipped names entries a layer cannot hold (device nodes, FIFOs,
	// sockets), at most 20; SkippedCount counts them all.
	Skipped      []string
	SkippedCount int
}

// Describer is a runtime that reports facts about a started sandbox's
// machine (vm: the accelerator used, the machine type, the kernel), for
// the sandbox's record and logs.
type Describer interface {
	Describe(ref Ref) map[string]string
}

// CachePruner is a runtime with caches derived from images (the vm
// runtime's disk images): PruneCaches drops those whose source is gone.
type CachePruner interface {
	PruneCaches() (int64, error)
}

// Pauser is a runtime that can save a running sandbox to disk, freeing its
// CPU and memory, and bring it back later (after a daemon restart too)
// with the same processes, memory, files and connections. The caller ends
// its agent session (agentapi.Client.EndSession) before Pause and
// connects anew after Resume.
type Pauser interface {
	Pause(ctx context.Context, ref Ref) error
	Resume(ctx context.Context, ref Ref) error
}

// Snapshotter is a runtime that can save a running sandbox's whole state
// (memory, processes, private writable layer) into a directory while the
// sandbox keeps running, and start new sandboxes from that directory, each
// an independent copy. The caller ends its agent session before
// SaveSnapshot (and connects anew after), and gives every copy an identity
// of its own through its agent (agentapi.IdentityRequest). A snapshot is
// started only with the image, resources and runtime version it was saved
// with; the caller keeps that record.
type Snapshotter interface {
	SaveSnapshot(ctx context.Context, ref Ref, dir string) error
	StartFromSnapshot(ctx context.Context, p StartParams, dir string) error
}

// BootIDSetter is a Snapshotter whose copies' agents cannot show a boot
// id of their own (the agent's IdentityResult has BootID false), but
// which can from the host: SetBootID makes id (a lowercase UUID) what
// /proc/sys/kernel/random/boot_id reads in the started sandbox. The caller
// gives it the id it gave the agent.
type BootIDSetter interface {
	SetBootID(ctx context.Context, ref Ref, id string) error
}

// MemoryReporter is a runtime that can say how much host memory a
// sandbox uses now (its cgroup's charge): what the manager estimates a
// memory snapshot's size from before it saves one.
type MemoryReporter interface {
	MemoryUsage(ref Ref) (int64, error)
}

// Versioner is a runtime that names its version: what a memory snapshot
// records, so that only the same version restores it.
type Versioner interface {
	Version(ctx context.Context) (string, error)
}

// LogRotator is a runtime whose sandboxes write logs on the host (PID 1's
// output, a serial console). The runtime keeps them on bounded mounts
// (the bound holds while no daemon runs); RotateLogs, which the daemon
// calls every second or so for each running sandbox, keeps their recent
// part within that bound.
type LogRotator interface {
	RotateLogs(ref Ref) error
}

// EndCauser is a runtime that can say why a sandbox ended by itself (its
// agent went away and the runtime no longer runs it): reason is one of
// CauseOOM, CausePanic, CausePowerOff, or "" when it cannot tell;
// detail says it for a person ("out of memory (the sandbox's memory limit
// is 128 MiB)"). The manager asks before Destroy, while what the runtime
// reads it from (a cgroup's memory events, a guest's console) still
// exists. What a guest wrote itself (its console) may be forged by the
// guest: the cause names how the sandbox ended, never grants anything.
type EndCauser interface {
	// EndCause is asked once the sandbox's agent went away.
	EndCause(ctx context.Context, ref Ref) (reason, detail string)
}

// OOMDetail is the detail of an EndOOM cause: what the CLI prints.
func OOMDetail(limitBytes uint64) string {
	if limitBytes == 0 {
		return "out of memory"
	}
	return fmt.Sprintf("out of memory (the sandbox's memory limit is %d MiB)", limitBytes>>20)
}

// Causes an EndCauser names (the manager ends the sandbox with the
// matching end reason).
const (
	CauseOOM      = "oom"      // a kernel's OOM killer killed the sandbox (or its init)
	CausePanic    = "panic"    // the guest kernel panicked
	CausePowerOff = "poweroff" // the guest powered itself off or rebooted
)

// OOMCounter is a runtime that counts, from the host, the processes a
// kernel's OOM killer killed in a sandbox that still runs (gVisor: the
// host kills the host-side stub of the guest process that allocated past
// the limit, and gVisor then kills that process), so a process killed
// for memory is named as such. kills only grows while the sandbox lives;
// detail is OOMDetail's sentence for the sandbox. (A vm's guest kernel
// kills its own processes; its agent says so on the process's end event,
// agentapi.Event.OOMKilled.)
type OOMCounter interface {
	OOMKills(ctx context.Context, ref Ref) (kills uint64, detail string, err error)
}
