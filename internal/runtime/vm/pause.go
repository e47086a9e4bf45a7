package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"corral/internal/cgroups"
	"corral/internal/runtime"
	"corral/internal/vminit"
)

// Files of a paused sandbox.
const (
	machineFile = "machine.json" // what Resume needs to start QEMU again
	stateFile   = "memory.state" // the guest's RAM and device state
	pausedFile  = "paused"       // present while paused
)

// Pause/resume bounds.
const (
	pauseTimeout  = 5 * time.Minute
	resumeTimeout = 2 * time.Minute
)

var _ runtime.Pauser = (*Runtime)(nil)

// machineRecord is machine.json: the sandbox's machine as Start made it
// (Netns empty in a snapshot's).
type machineRecord struct {
	Initramfs   string         `json:"initramfs"`
	RootDisk    string         `json:"root_disk"`
	ModulesDisk string         `json:"modules_disk"`
	Scratch     string         `json:"scratch"`
	MAC         string         `json:"mac"`
	UID         int            `json:"uid,omitempty"` // QEMU's (uids.go); 0: qemuUser
	Netns       string         `json:"netns,omitempty"`
	Limits      cgroups.Limits `json:"limits"`
	Info        Info           `json:"info"`
}

func writeMachineRecord(dir string, rec *machineRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, machineFile), b, 0o600)
}

func loadMachine(dir string) (*machineRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, machineFile))
	if err != nil {
		return nil, err
	}
	var rec machineRecord
	return &rec, json.Unmarshal(b, &rec)
}

// Pause saves the guest's whole state (RAM, devices; its disks are already
// files) into <dir>/memory.state through QEMU's migration and stops QEMU,
// freeing its CPU and memory. The network namespace, disks and cgroup stay.
func (r *Runtime) Pause(ctx context.Context, ref runtime.Ref) error {
	if err := ref.Check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout)
	defer cancel()
	start := time.Now()
	q, err := dialQMP(ctx, filepath.Join(ref.Dir, qmpSock))
	if err != nil {
		return fmt.Errorf("pausing %s: %w", ref.ID, err)
	}
	defer q.close()
	if _, err := q.exec("stop", nil); err != nil {
		return fmt.Errorf("pausing %s: %w", ref.ID, err)
	}
	if err := r.saveState(ctx, q, ref.Dir); err != nil {
		_, _ = q.exec("cont", nil) // keep the sandbox usable
		return fmt.Errorf("pausing %s: %w", ref.ID, err)
	}
	if err := os.WriteFile(filepath.Join(ref.Dir, pausedFile), nil, 0o600); err != nil {
		return err
	}
	_, _ = q.exec("quit", nil)
	if err := r.killQEMU(ctx, ref); err != nil {
		return err
	}
	r.log.Debug("vm paused", "sandbox", ref.ID, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// saveState migrates the stopped guest into the state file, through a
// descriptor (QEMU runs unprivileged and cannot open the sandbox directory).
func (r *Runtime) saveState(ctx context.Context, q *qmp, dir string) error {
	tmp := filepath.Join(dir, stateFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	if err := q.sendFD("corral-state", f); err != nil {
		return err
	}
	if _, err := q.exec("migrate", map[string]string{"uri": "fd:corral-state"}); err != nil {
		return err
	}
	if err := q.waitMigration(ctx); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

// Resume starts QEMU again from the state file: the same guest, its
// processes, files and connections, on a new tap in the same namespace.
func (r *Runtime) Resume(ctx context.Context, ref runtime.Ref) error {
	if err := ref.Check(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(ref.Dir, pausedFile)); err != nil {
		return fmt.Errorf("resuming %s: not paused: %w", ref.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	start := time.Now()
	// The QEMU of a pause or resume whose daemon was killed midway
	// (Status): its guest has not run since the state was saved.
	if err := r.killQEMU(ctx, ref); err != nil {
		return fmt.Errorf("resuming %s: %w", ref.ID, err)
	}
	rec, err := loadMachine(ref.Dir)
	if err != nil {
		return fmt.Errorf("resuming %s: %w", ref.ID, err)
	}
	m := rec.machine()
	if rec.Netns != "" {
		if m.tap, err = replugTap(rec.Netns); err != nil {
			return fmt.Errorf("resuming %s: %w", ref.ID, err)
		}
	}
	defer m.close()
	if err := r.restore(ctx, ref, m, filepath.Join(ref.Dir, stateFile)); err != nil {
		return fmt.Errorf("resuming %s: %w", ref.ID, err)
	}
	for _, f := range []string{pausedFile, stateFile} {
		if err := os.Remove(filepath.Join(ref.Dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	r.log.Debug("vm resumed", "sandbox", ref.ID, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// continueIncoming waits for QEMU to load the state and starts the guest.
func (r *Runtime) continueIncoming(ctx context.Context, ref runtime.Ref) error {
	q, err := dialQMP(ctx, filepath.Join(ref.Dir, qmpSock))
	if err != nil {
		return err
	}
	defer q.close()
	if err := q.waitMigration(ctx); err != nil {
		return fmt.Errorf("loading the saved state: %w", err)
	}
	if err := markReplug(ref); err != nil {
		return err
	}
	if _, err = q.exec("cont", nil); err != nil {
		return err
	}
	if err := startKicks(q); err != nil {
		return err
	}
	return r.resetAgentChannel(q, ref)
}

// resetAgentChannel replugs the agent's virtio-serial port. The port's
// state came back with the migration (connected to a host that went with
// the old QEMU), and QEMU then stalls the channel after its first bytes;
// a new port starts clean, and the agent finds it by name. A port already
// removed (by a replug whose daemon was killed before it added the new
// one) is only added. Its end removes the replug mark (markReplug).
func (r *Runtime) resetAgentChannel(q *qmp, ref runtime.Ref) error {
	_, err := q.exec("device_del", map[string]string{"id": agentPortID})
	switch {
	case err == nil:
		// The removal completes asynchronously: wait for its event.
		if err := q.waitDeviceDeleted(agentPortID, 10*time.Second); err != nil {
			return err
		}
	case !strings.Contains(err.Error(), "not found"):
		return err
	}
	_, err = q.exec("device_add", map[string]string{"driver": "virtserialport", "bus": "vser.0",
		"chardev": "agent", "name": vminit.AgentPort, "id": agentPortID})
	if err != nil {
		return err
	}
	return unmarkReplug(ref)
}

// kickEvery is the period of the balloon's statistics requests, an
// interrupt the guest gets however idle it is. A guest restored from a
// saved state under TCG has been seen to sleep through its own timer (it
// idled until some interrupt came, which made every restore racy); the
// requests wake it within a period.
const kickEvery = 1

// startKicks turns the balloon's statistics requests on.
func startKicks(q *qmp) error {
	_, err := q.exec("qom-set", map[string]any{"path": "/machine/peripheral/" + balloonID,
		"property": "guest-stats-polling-interval", "value": kickEvery})
	return err
}
