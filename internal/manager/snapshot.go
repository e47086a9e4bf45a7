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
	"syscall"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	imagestore "corral/internal/image/store"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// snapshotTimeout bounds one memory snapshot (the guest's RAM goes to disk).
const snapshotTimeout = 5 * time.Minute

func (c *Config) snapshotsDir() string { return filepath.Join(c.StateDir, "snapshots") }

// SnapshotMemory saves the running sandbox id's whole state (memory,
// processes, writable layer) as a durable snapshot, optionally named; the
// sandbox runs on. Streams in flight on its agent connection end.
func (m *Manager) SnapshotMemory(ctx context.Context, id, name string) (*sandbox.Snapshot, error) {
	if name != "" && !sandbox.ValidSnapshotName(name) {
		return nil, errdefs.Invalid("name", "%q is not a snapshot name (letters, digits, '_', '.', '-')", name)
	}
	if sandbox.ValidSnapshotID(name) {
		return nil, errdefs.Invalid("name", "%q has the shape of a snapshot id", name)
	}
	l, sn, err := m.snapshotter(id)
	if err != nil {
		return nil, err
	}
	version, err := m.runtimeVersion(ctx, l.rt)
	if err != nil {
		return nil, err
	}
	if name != "" {
		if _, err := m.store.GetSnapshot(ctx, name); err == nil {
			return nil, fmt.Errorf("%w: a snapshot named %q exists", errdefs.ErrAlreadyExists, name)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	l.op.Lock()
	defer l.op.Unlock()
	sb := l.snapshot()
	l.mu.Lock()
	client := l.client
	l.mu.Unlock()
	if sb.State != sandbox.Running || client == nil {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not running", errdefs.ErrFailedPrecondition, id, sb.State)
	}
	rec := &sandbox.Snapshot{
		ID: sandbox.NewSnapshotID(), Name: name, SandboxID: id, Spec: sb.Spec,
		Runtime: l.rt.Name(), RuntimeVersion: version,
		AgentProtocol: client.Version(), AgentVersion: client.AgentVersion(), CreatedAt: time.Now().UTC(),
	}
	rec.Spec.Name, rec.Spec.Entrypoint = "", nil
	rec.Dir = filepath.Join(m.cfg.snapshotsDir(), rec.ID)
	if err := os.MkdirAll(rec.Dir, 0o700); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := m.saveLocked(ctx, l, client, sn, rec.Dir); err != nil {
		os.RemoveAll(rec.Dir)
		return nil, err
	}
	took := time.Since(start)
	rec.SizeBytes = diskUsage(rec.Dir)
	if err := m.keep(ctx, rec); err != nil {
		os.RemoveAll(rec.Dir)
		return nil, err
	}
	m.event(id, "snapshot", "memory snapshot saved", map[string]string{
		"snapshot": rec.ID, "bytes": fmt.Sprint(rec.SizeBytes), "took": took.Round(time.Millisecond).String()})
	return rec, nil
}

// saveLocked ends the agent session, has the runtime save the sandbox into
// dir, and reconnects (the caller holds l.op). A sandbox whose agent does
// not come back is ended as crashed.
func (m *Manager) saveLocked(ctx context.Context, l *live, client *agentapi.Client, sn runtime.Snapshotter, dir string) error {
	l.mu.Lock()
	l.saving = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.saving = false
		l.mu.Unlock()
	}()
	if err := client.EndSession(ctx); err != nil {
		m.log.Warn("ending the agent session before a snapshot", "sandbox", l.ref.ID, "err", err)
	}
	saveErr := sn.SaveSnapshot(ctx, l.ref, dir)
	next, err := m.connect(context.WithoutCancel(ctx), l)
	if err != nil {
		m.event(l.ref.ID, "crashed", "agent gone after a snapshot", map[string]string{"err": err.Error()})
		m.terminateAsync(l.ref.ID, sandbox.EndCrashed, nil)
		return errors.Join(saveErr, err)
	}
	l.mu.Lock()
	l.client = next
	l.mu.Unlock()
	m.watch(l, next)
	if saveErr != nil {
		return fmt.Errorf("snapshotting sandbox %s: %w", l.ref.ID, saveErr)
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
	if err := m.store.PutSnapshot(ctx, rec); err != nil {
		m.releaseImage(rec.ID)
		return err
	}
	return nil
}

// snapshotter returns a running sandbox's live side and its runtime's
// Snapshotter.
func (m *Manager) snapshotter(id string) (*live, runtime.Snapshotter, error) {
	l, err := m.liveOf(id)
	if err != nil {
		return nil, nil, err
	}
	sn, ok := l.rt.(runtime.Snapshotter)
	if !ok {
		return nil, nil, fmt.Errorf("%w: runtime %s cannot take memory snapshots", errdefs.ErrNotSupported, l.rt.Name())
	}
	return l, sn, nil
}

// runtimeVersion is rt's version string ("" for a runtime that names
// none), asked once.
func (m *Manager) runtimeVersion(ctx context.Context, rt runtime.Runtime) (string, error) {
	m.mu.Lock()
	v, ok := m.versions[rt.Name()]
	m.mu.Unlock()
	if ok {
		return v, nil
	}
	if vr, ok := rt.(runtime.Versioner); ok {
		var err error
		if v, err = vr.Version(ctx); err != nil {
			return "", err
		}
	}
	m.mu.Lock()
	m.versions[rt.Name()] = v
	m.mu.Unlock()
	return v, nil
}

// Snapshots lists every memory snapshot.
func (m *Manager) Snapshots(ctx context.Context) ([]*sandbox.Snapshot, error) {
	return m.store.ListSnapshots(ctx)
}

// Snapshot returns the snapshot named by ref (id or name).
func (m *Manager) Snapshot(ctx context.Context, ref string) (*sandbox.Snapshot, error) {
	if !sandbox.ValidSnapshotRef(ref) {
		return nil, fmt.Errorf("%w: snapshot %q", errdefs.ErrNotFound, ref)
	}
	return m.store.GetSnapshot(ctx, ref)
}

// RemoveSnapshot deletes a snapshot's record, files and image lease.
// Sandboxes started from it are copies and keep running.
func (m *Manager) RemoveSnapshot(ctx context.Context, ref string) (*sandbox.Snapshot, error) {
	rec, err := m.Snapshot(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := m.store.DeleteSnapshot(ctx, rec.ID); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(rec.Dir); err != nil {
		return nil, fmt.Errorf("removing snapshot files: %w", err)
	}
	m.releaseImage(rec.ID)
	return rec, nil
}

// checkRestorable refuses a snapshot this daemon cannot restore, saying
// why.
func (m *Manager) checkRestorable(ctx context.Context, rec *sandbox.Snapshot) error {
	rt := m.cfg.Runtimes[rec.Runtime]
	if rt == nil {
		return fmt.Errorf("%w: snapshot %s was taken by runtime %q, which this daemon does not run", errdefs.ErrFailedPrecondition, rec.ID, rec.Runtime)
	}
	if _, ok := rt.(runtime.Snapshotter); !ok {
		return fmt.Errorf("%w: runtime %s cannot restore memory snapshots", errdefs.ErrNotSupported, rec.Runtime)
	}
	v, err := m.runtimeVersion(ctx, rt)
	if err != nil {
		return err
	}
	if v != rec.RuntimeVersion {
		return fmt.Errorf("%w: snapshot %s was taken by %s %q; this daemon runs %q, which cannot restore it",
			errdefs.ErrFailedPrecondition, rec.ID, rec.Runtime, rec.RuntimeVersion, v)
	}
	if !slices.Contains(agentapi.SupportedVersions, rec.AgentProtocol) {
		return fmt.Errorf("%w: snapshot %s holds an agent speaking protocol %d; this daemon speaks %v",
			errdefs.ErrFailedPrecondition, rec.ID, rec.AgentProtocol, agentapi.SupportedVersions)
	}
	if _, err := os.Stat(rec.Dir); err != nil {
		return fmt.Errorf("%w: snapshot %s has lost its files: %v", errdefs.ErrFailedPrecondition, rec.ID, err)
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
func (m *Manager) giveIdentity(ctx context.Context, l *live, client *agentapi.Client, netID *agentapi.IdentityNetwork, nameservers []string) error {
	req := agentapi.IdentityRequest{
		Hostname: l.ref.ID, MachineID: randomHex(16), BootID: randomUUID(), Entropy: randomBytes(64),
		Network: netID, Nameservers: nameservers,
	}
	res, err := client.Identity(ctx, req)
	if err != nil {
		return fmt.Errorf("giving the copy its identity: %w", err)
	}
	m.log.Debug("copy identity", "sandbox", l.ref.ID, "rng", res.RNG, "boot_id", res.BootID, "network", res.Network)
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
