package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/ids"
	imagestore "corral/internal/image/store"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// snapshotTimeout bounds one memory snapshot (the guest's RAM goes to disk).
const snapshotTimeout = 5 * time.Minute

func (c *Config) snapshotsDir() string { return filepath.Join(c.StateDir, "snapshots") }

// Snapshots is the memory snapshot service: durable snapshots of running
// sandboxes (memory, processes, writable layer), listed, removed, and
// started from (Manager.Create with from_snapshot), and forks.
type Snapshots struct{ m *Manager }

// reservedPrefix begins the names of the snapshots the daemon takes for
// itself (warm pool templates, forks), which it may remove at start.
const reservedPrefix = "corral."

// Take saves the running sandbox id's whole state as a durable snapshot,
// optionally named; the sandbox runs on. Streams in flight on its agent
// connection end.
func (s Snapshots) Take(ctx context.Context, id, name string) (*sandbox.Snapshot, error) {
	if strings.HasPrefix(name, reservedPrefix) {
		return nil, errdefs.Invalid("name", "names beginning with %q are the daemon's own", reservedPrefix)
	}
	return s.take(ctx, id, name)
}

// take is Take without the check of reserved names.
func (s Snapshots) take(ctx context.Context, id, name string) (*sandbox.Snapshot, error) {
	m := s.m
	if name != "" && !sandbox.ValidSnapshotName(name) {
		return nil, errdefs.Invalid("name", "%q is not a snapshot name (letters, digits, '_', '.', '-')", name)
	}
	if ids.Snapshot(name) {
		return nil, errdefs.Invalid("name", "%q has the shape of a snapshot id", name)
	}
	h, sn, err := m.snapshotter(ctx, id)
	if err != nil {
		return nil, err
	}
	version, err := m.runtimeVersion(ctx, h.Runtime())
	if err != nil {
		return nil, err
	}
	if name != "" {
		if _, err := m.records.GetSnapshot(ctx, name); err == nil {
			return nil, fmt.Errorf("%w: a snapshot named %q exists", errdefs.ErrAlreadyExists, name)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	h.Lock()
	defer h.Unlock()
	sb := h.Record()
	client := h.Agent()
	if sb.State != sandbox.Running || client == nil {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not running", errdefs.ErrFailedPrecondition, id, sb.State)
	}
	rec := &sandbox.Snapshot{
		ID: ids.NewSnapshot(), Name: name, SandboxID: id, Spec: sb.Spec,
		Runtime: h.Runtime().Name(), RuntimeVersion: version,
		AgentProtocol: client.Version(), AgentVersion: client.AgentVersion(), CreatedAt: time.Now().UTC(),
	}
	rec.Spec.Name, rec.Spec.Entrypoint = "", nil
	release, err := m.reserveSnapshot(ctx, h)
	if err != nil {
		return nil, err
	}
	defer release()
	rec.Dir = filepath.Join(m.cfg.snapshotsDir(), rec.ID)
	if err := os.MkdirAll(rec.Dir, 0o700); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := m.saveLocked(ctx, h, client, sn, rec.Dir); err != nil {
		os.RemoveAll(rec.Dir)
		return nil, err
	}
	took := time.Since(start)
	rec.SizeBytes = diskUsage(rec.Dir)
	if err := m.keep(ctx, rec); err != nil {
		os.RemoveAll(rec.Dir)
		return nil, err
	}
	h.Milestone("snapshot", "memory snapshot saved", map[string]string{
		"snapshot": rec.ID, "bytes": fmt.Sprint(rec.SizeBytes), "took": took.Round(time.Millisecond).String()})
	return rec, nil
}

// saveLocked ends the agent session, has the runtime save the sandbox into
// dir, and reconnects (the caller holds h's lock). A sandbox whose agent
// does not come back is ended as crashed, or as agent_channel_lost when
// it still runs.
func (m *Manager) saveLocked(ctx context.Context, h *handle.Handle, client *agentapi.Client, sn runtime.Snapshotter, dir string) error {
	h.Quiet(true)
	defer h.Quiet(false)
	if err := client.EndSession(ctx); err != nil {
		m.log.WarnContext(ctx, "ending the agent session before a snapshot", "sandbox", h.ID(), "err", err)
	}
	saveErr := sn.SaveSnapshot(ctx, h.Ref(), dir)
	next, err := h.Connect(context.WithoutCancel(ctx))
	if err != nil {
		// After a good save, an agent that the still running sandbox
		// does not let the daemon reach again means its channel was
		// taken from inside.
		if saveErr == nil && m.agentGoneReason(h) == sandbox.EndAgentChannelLost {
			m.channelLost(h, "the agent did not answer after a snapshot", map[string]string{"reconnect": err.Error()})
		} else {
			h.Milestone("crashed", "agent gone after a snapshot", map[string]string{"err": err.Error()})
			m.terminateAsync(h.ID(), sandbox.EndCrashed, nil)
		}
		return errors.Join(saveErr, err)
	}
	if old := h.SetAgent(next); old != nil {
		old.Close()
	}
	if h.Watched() { // not a sandbox waiting in a warm pool
		m.watch(h)
	}
	if saveErr != nil {
		return fmt.Errorf("snapshotting sandbox %s: %w", h.ID(), saveErr)
	}
	return nil
}

// keep leases the snapshot's image (so it is never pruned from under it)
// and stores its record.
func (m *Manager) keep(ctx context.Context, rec *sandbox.Snapshot) error {
	if d := rec.Spec.ImageDigest; d != "" && m.cfg.Images != nil {
		if err := m.cfg.Images.Lease(rec.ID, imagestore.Digest(d)); err != nil {
			return fmt.Errorf("leasing image %s: %w", d, err)
		}
	}
	if err := m.records.PutSnapshot(ctx, rec); err != nil {
		m.releaseLease(rec.ID)
		return err
	}
	return nil
}

// releaseLease drops the image lease a snapshot holds (no-op without one).
func (m *Manager) releaseLease(id string) {
	if m.cfg.Images == nil {
		return
	}
	if err := m.cfg.Images.Release(id); err != nil {
		m.log.Error("releasing image lease", "holder", id, "err", err)
	}
}

// snapshotter returns a running sandbox's handle and its runtime's
// Snapshotter.
func (m *Manager) snapshotter(ctx context.Context, id string) (*handle.Handle, runtime.Snapshotter, error) {
	h, err := m.live(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	sn, ok := h.Runtime().(runtime.Snapshotter)
	if !ok {
		return nil, nil, fmt.Errorf("%w: runtime %s cannot take memory snapshots", errdefs.ErrNotSupported, h.Runtime().Name())
	}
	if err := refuseWithVolumes(h.Record(), "saved to a memory snapshot or forked"); err != nil {
		return nil, nil, err
	}
	return h, sn, nil
}

// runtimeVersion is rt's version string ("" for a runtime that names
// none), asked once.
func (m *Manager) runtimeVersion(ctx context.Context, rt runtime.Runtime) (string, error) {
	m.versionsMu.Lock()
	v, ok := m.versions[rt.Name()]
	m.versionsMu.Unlock()
	if ok {
		return v, nil
	}
	if vr, ok := rt.(runtime.Versioner); ok {
		var err error
		if v, err = vr.Version(ctx); err != nil {
			return "", err
		}
	}
	m.versionsMu.Lock()
	m.versions[rt.Name()] = v
	m.versionsMu.Unlock()
	return v, nil
}

// List lists every memory snapshot.
func (s Snapshots) List(ctx context.Context) ([]*sandbox.Snapshot, error) {
	return s.m.records.ListSnapshots(ctx)
}

// Get returns the snapshot named by ref (id or name).
func (s Snapshots) Get(ctx context.Context, ref string) (*sandbox.Snapshot, error) {
	if !sandbox.ValidSnapshotRef(ref) {
		return nil, fmt.Errorf("%w: snapshot %q", errdefs.ErrNotFound, ref)
	}
	return s.m.records.GetSnapshot(ctx, ref)
}

// Remove deletes a snapshot's record, files and image lease. Sandboxes
// started from it are copies and keep running.
func (s Snapshots) Remove(ctx context.Context, ref string) (*sandbox.Snapshot, error) {
	rec, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := s.m.records.DeleteSnapshot(ctx, rec.ID); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(rec.Dir); err != nil {
		return nil, fmt.Errorf("removing snapshot files: %w", err)
	}
	s.m.releaseLease(rec.ID)
	return rec, nil
}

// restorable fills in spec (not yet normalized) from the snapshot it
// starts from and returns that snapshot, refusing one this daemon cannot
// restore or a spec that asks for what a copy cannot change.
func (s Snapshots) restorable(ctx context.Context, spec *sandbox.Spec) (*sandbox.Snapshot, error) {
	if !sandbox.ValidSnapshotRef(spec.FromSnapshot) {
		return nil, errdefs.Invalid("from_snapshot", "%q is neither a snapshot id nor a snapshot name", spec.FromSnapshot)
	}
	rec, err := s.Get(ctx, spec.FromSnapshot)
	if err != nil {
		return nil, err
	}
	if err := fromSnapshot(spec, rec); err != nil {
		return nil, err
	}
	if err := s.m.checkRestorable(ctx, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// checkRestorable refuses a snapshot this daemon cannot restore, saying
// why.
func (m *Manager) checkRestorable(ctx context.Context, rec *sandbox.Snapshot) error {
	if err := m.checkCompatible(ctx, rec); err != nil {
		return err
	}
	if _, err := os.Stat(rec.Dir); err != nil {
		return fmt.Errorf("%w: snapshot %s has lost its files: %v", errdefs.ErrFailedPrecondition, rec.ID, err)
	}
	return nil
}

// sameRuntime refuses a snapshot that the runtime at version v (its own
// runtime, on this daemon) cannot restore: one another version saved, or
// whose agent speaks a protocol this daemon does not.
func sameRuntime(rec *sandbox.Snapshot, v string) error {
	if v != rec.RuntimeVersion {
		return fmt.Errorf("%w: snapshot %s was taken by %s %q; this daemon runs %q, which cannot restore it",
			errdefs.ErrFailedPrecondition, rec.ID, rec.Runtime, rec.RuntimeVersion, v)
	}
	if !slices.Contains(agentapi.SupportedVersions, rec.AgentProtocol) {
		return fmt.Errorf("%w: snapshot %s holds an agent speaking protocol %d; this daemon speaks %v",
			errdefs.ErrFailedPrecondition, rec.ID, rec.AgentProtocol, agentapi.SupportedVersions)
	}
	return nil
}

// fromSnapshot fills in spec (not yet normalized) from the snapshot it
// names: the snapshot's image, runtime and resources (a different one
// asked for is an error naming the field), and its env, workdir, user,
// timeouts, network policy and exposed ports unless spec sets them.
func fromSnapshot(spec *sandbox.Spec, rec *sandbox.Snapshot) error {
	src := rec.Spec
	for _, f := range []struct {
		field     string
		set, same bool
	}{
		{"runtime", spec.Runtime != "", spec.Runtime == src.Runtime},
		{"image", spec.Image != "", spec.Image == src.Image || spec.Image == src.ImageDigest},
		{"cpu", spec.CPU != 0, spec.CPU == src.CPU},
		{"cpu_limit", spec.CPULimit != 0, spec.CPULimit == src.CPULimit},
		{"memory_mb", spec.MemoryMB != 0, spec.MemoryMB == src.MemoryMB},
		{"memory_limit_mb", spec.MemoryLimitMB != 0, spec.MemoryLimitMB == src.MemoryLimitMB},
		{"disk_mb", spec.DiskMB != 0, spec.DiskMB == src.DiskMB},
		{"entrypoint", len(spec.Entrypoint) > 0, false},
	} {
		if f.set && !f.same {
			return errdefs.Invalid(f.field, "a sandbox from snapshot %s takes the snapshot's (its processes already run)", rec.ID)
		}
	}
	spec.Runtime, spec.Image = src.Runtime, src.Image
	if src.ImageDigest != "" {
		spec.Image = src.ImageDigest // the very image, even if its tag moved
	}
	spec.CPU, spec.CPULimit, spec.MemoryMB, spec.MemoryLimitMB, spec.DiskMB = src.CPU, src.CPULimit, src.MemoryMB, src.MemoryLimitMB, src.DiskMB
	if spec.Env == nil {
		spec.Env = src.Env
	}
	if spec.Secrets == nil {
		spec.Secrets, spec.SecretEnv = src.Secrets, src.SecretEnv
	}
	if spec.Workdir == "" {
		spec.Workdir = src.Workdir
	}
	if spec.User == "" {
		spec.User = src.User
	}
	if spec.Timeout == 0 {
		spec.Timeout = src.Timeout
	}
	if spec.IdleTimeout == 0 {
		spec.IdleTimeout = src.IdleTimeout
	}
	if !spec.Network.BlockNetwork && len(spec.Network.CIDRAllowlist) == 0 && len(spec.Network.DomainAllowlist) == 0 {
		spec.Network = src.Network
	}
	if spec.Expose == nil {
		spec.Expose = src.Expose
	}
	spec.FromSnapshot = rec.ID
	return nil
}

// giveIdentity makes a copy of a snapshot its own machine: its hostname
// (its id), a machine id and boot id of its own, a reseeded RNG, its own
// address and resolver.
func (m *Manager) giveIdentity(ctx context.Context, h *handle.Handle, client *agentapi.Client, netID *agentapi.IdentityNetwork, nameservers []string) error {
	req := agentapi.IdentityRequest{
		Hostname: h.ID(), MachineID: randomHex(16), BootID: randomUUID(), Entropy: randomBytes(64),
		Network: netID, Nameservers: nameservers,
	}
	res, err := client.Identity(ctx, req)
	if err != nil {
		return fmt.Errorf("giving the copy its identity: %w", err)
	}
	if bs, ok := h.Runtime().(runtime.BootIDSetter); ok && !res.BootID {
		if err := bs.SetBootID(ctx, h.Ref(), req.BootID); err != nil {
			return fmt.Errorf("giving the copy its boot_id: %w", err)
		}
		res.BootID = true
	}
	m.log.Debug("copy identity", "sandbox", h.ID(), "rng", res.RNG, "boot_id", res.BootID, "network", res.Network)
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return b
}

func randomHex(n int) string { return hex.EncodeToString(randomBytes(n)) }

func randomUUID() string {
	b := randomBytes(16)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// diskUsage is the bytes dir's own files occupy on disk: holes in sparse
// files do not count, nor do files hard-linked with the runtime's caches
// (a vm snapshot's read-only disks).
func diskUsage(dir string) int64 {
	statBlocks := func(fi fs.FileInfo) int64 {
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
			return fi.Size()
		case st.Nlink > 1:
			return 0
		}
		return st.Blocks * 512
	}
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += statBlocks(fi)
			}
		}
		return nil
	})
	return n
}
