package vm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"corral/internal/cgroups"
	"corral/internal/cleanup"
	"corral/internal/runtime"
)

// Files of a memory snapshot directory, beside machine.json and
// memory.state.
const (
	snapScratch = "scratch.img"
	snapRoot    = "root.img"
	snapModules = "modules.img"
	snapInitrd  = "initramfs.img"
)

var _ runtime.Snapshotter = (*Runtime)(nil)

// SaveSnapshot stops the guest, migrates its state into dir/memory.state,
// copies its scratch disk (consistent with that state: the guest is
// stopped) and records its machine, then lets the guest run on. The
// read-only disks and initramfs are hard-linked into dir, so pruning the
// caches never takes them from under a snapshot.
func (r *Runtime) SaveSnapshot(ctx context.Context, ref runtime.Ref, dir string) error {
	if err := ref.Check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout)
	defer cancel()
	start := time.Now()
	rec, err := loadMachine(ref.Dir)
	if err != nil {
		return fmt.Errorf("snapshotting %s: %w", ref.ID, err)
	}
	q, err := dialQMP(ctx, filepath.Join(ref.Dir, qmpSock))
	if err != nil {
		return fmt.Errorf("snapshotting %s: %w", ref.ID, err)
	}
	defer q.close()
	// From here until the port is replugged, a daemon killed midway
	// leaves work for the next one's Dial (runGuest).
	if err := markReplug(ref); err != nil {
		return fmt.Errorf("snapshotting %s: %w", ref.ID, err)
	}
	if _, err := q.exec("stop", nil); err != nil {
		return fmt.Errorf("snapshotting %s: %w", ref.ID, err)
	}
	err = r.saveState(ctx, q, dir)
	if err == nil {
		err = copySparse(ctx, rec.Scratch, filepath.Join(dir, snapScratch))
	}
	if _, cerr := q.exec("cont", nil); err == nil && cerr != nil {
		err = fmt.Errorf("letting the guest run on: %w", cerr)
	}
	// The migration left the agent's channel stalled, as after a resume.
	if rerr := r.resetAgentChannel(q, ref); err == nil && rerr != nil {
		err = fmt.Errorf("replugging the agent's port: %w", rerr)
	}
	if err != nil {
		return fmt.Errorf("snapshotting %s: %w", ref.ID, err)
	}
	rec.Scratch = snapScratch
	for _, f := range []struct {
		path *string
		name string
	}{{&rec.RootDisk, snapRoot}, {&rec.ModulesDisk, snapModules}, {&rec.Initramfs, snapInitrd}} {
		if err := os.Link(*f.path, filepath.Join(dir, f.name)); err == nil {
			*f.path = f.name
		}
	}
	rec.Netns = ""
	if err := writeMachineRecord(dir, rec); err != nil {
		return err
	}
	r.log.Debug("vm snapshot saved", "sandbox", ref.ID, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// StartFromSnapshot starts the new sandbox p as a copy of the snapshot in
// dir: its own scratch disk (a copy), a tap in its own namespace, QEMU
// loading the saved state. The guest keeps the saved address until the
// caller gives it its own (agentapi.IdentityRequest).
func (r *Runtime) StartFromSnapshot(ctx context.Context, p runtime.StartParams, dir string) error {
	if err := p.Ref.Check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	c := cleanup.Make(ctx)
	defer c.Clean()
	c.Add(func(ctx context.Context) {
		if err := r.Destroy(ctx, p.Ref); err != nil {
			r.log.Error("rolling back a vm restore", "sandbox", p.ID, "err", err)
		}
	})
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(r.indexPath(p.ID), []byte(p.Dir), 0o600); err != nil {
		return err
	}
	rec, err := loadMachine(dir)
	if err != nil {
		return fmt.Errorf("reading the snapshot: %w", err)
	}
	// The copy links the read-only files into its own directory, so that
	// it can pause and resume after the snapshot is removed (a fork's is
	// at once).
	for _, f := range []*string{&rec.RootDisk, &rec.ModulesDisk, &rec.Initramfs} {
		if !filepath.IsAbs(*f) {
			*f = filepath.Join(dir, *f)
		}
		if _, err := os.Stat(*f); err != nil {
			return fmt.Errorf("the snapshot's disk %s is gone: %w", *f, err)
		}
		own := filepath.Join(p.Dir, filepath.Base(*f))
		if err := os.Link(*f, own); err == nil {
			*f = own
		}
	}
	scratch := filepath.Join(p.Dir, "scratch.img")
	if err := copySparse(ctx, filepath.Join(dir, snapScratch), scratch); err != nil {
		return err
	}
	rec.Scratch, rec.Netns = scratch, p.NetnsPath
	if rec.UID, err = r.allocUID(p.ID); err != nil {
		return fmt.Errorf("QEMU uid: %w", err)
	}
	m := rec.machine()
	if p.NetnsPath != "" {
		if _, m.tap, err = plugNetwork(p.NetnsPath, rec.MAC); err != nil {
			return err
		}
	}
	defer m.close()
	if err := writeMachineRecord(p.Dir, rec); err != nil {
		return err
	}
	if err := r.restore(ctx, p.Ref, m, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("starting %s from a snapshot: %w", p.ID, err)
	}
	if err := writeInfo(p.Dir, m.Info); err != nil {
		return err
	}
	c.Release()
	return nil
}

// restore starts QEMU for ref loading the state file and lets the guest
// run.
func (r *Runtime) restore(ctx context.Context, ref runtime.Ref, m *machine, statePath string) error {
	state, err := os.Open(statePath)
	if err != nil {
		return err
	}
	defer state.Close()
	m.incoming = state
	if err := cgroups.Create(r.cgroup(ref.ID)); err != nil {
		return err
	}
	if err := cgroups.SetLimits(r.cgroup(ref.ID), m.Limits); err != nil {
		return err
	}
	if err := r.launch(ctx, runtime.StartParams{Ref: ref}, m); err != nil {
		return err
	}
	if err := r.continueIncoming(ctx, ref); err != nil {
		_ = r.killQEMU(context.WithoutCancel(ctx), ref)
		return err
	}
	return nil
}

// copySparse copies a disk image, keeping its holes.
func copySparse(ctx context.Context, from, to string) error {
	out, err := exec.CommandContext(ctx, "cp", "--sparse=always", "--", from, to).CombinedOutput()
	if err != nil {
		return fmt.Errorf("copying %s: %v: %s", from, err, out)
	}
	return nil
}

// machine is the machine a record describes.
func (rec *machineRecord) machine() *machine { return &machine{machineRecord: *rec} }

// Version names what a saved guest state depends on: QEMU's version, the
// kernel, the accelerator and the machine type.
func (r *Runtime) Version(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, r.cfg.QEMUPath, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("qemu --version: %w", err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return fmt.Sprintf("%s; kernel %s; accel %s; machine %s", strings.TrimSpace(first), r.kernel.release, r.cfg.Accel, r.cfg.Machine), nil
}
