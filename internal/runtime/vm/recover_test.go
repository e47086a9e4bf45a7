package vm

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/ids"
	"corral/internal/runtime"
)

// A daemon killed in the middle of a pause or a memory snapshot leaves the
// guest stopped under a QEMU that carries on without it; the next daemon
// must get each such guest back, running or paused, with its files. Each
// case makes by hand the state a kill at one point leaves.
func TestInterruptedSave(t *testing.T) {
	r := newRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	save := func(t *testing.T, ref runtime.Ref) {
		q, err := dialQMP(ctx, filepath.Join(ref.Dir, qmpSock))
		if err != nil {
			t.Fatal(err)
		}
		defer q.close()
		if _, err := q.exec("stop", nil); err != nil {
			t.Fatal(err)
		}
		if err := r.saveState(ctx, q, ref.Dir); err != nil {
			t.Fatal(err)
		}
	}
	// A memory snapshot killed after it let the guest run again, before
	// or midway through replugging the agent's port.
	ranAgain := func(unplug bool) func(t *testing.T, ref runtime.Ref) {
		return func(t *testing.T, ref runtime.Ref) {
			if err := markReplug(ref); err != nil {
				t.Fatal(err)
			}
			save(t, ref)
			q, err := dialQMP(ctx, filepath.Join(ref.Dir, qmpSock))
			if err != nil {
				t.Fatal(err)
			}
			defer q.close()
			if _, err := q.exec("cont", nil); err != nil {
				t.Fatal(err)
			}
			if !unplug {
				return
			}
			if _, err := q.exec("device_del", map[string]string{"id": agentPortID}); err != nil {
				t.Fatal(err)
			}
			if err := q.waitDeviceDeleted(agentPortID, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name  string
		after func(t *testing.T, ref runtime.Ref) // what the killed daemon got done after ending the session
		want  runtime.State
	}{
		// A memory snapshot, or a pause before its mark: the guest is
		// stopped after its migration, the agent's port stalled.
		{"saved", save, runtime.StateRunning},
		// A pause killed before it quit QEMU.
		{"saved and marked", func(t *testing.T, ref runtime.Ref) {
			save(t, ref)
			if err := os.WriteFile(filepath.Join(ref.Dir, pausedFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, runtime.StatePaused},
		{"let run, port stalled", ranAgain(false), runtime.StateRunning},
		{"let run, port unplugged", ranAgain(true), runtime.StateRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := runtime.Ref{ID: ids.NewSandbox()}
			ref.Dir = filepath.Join(env.base, "interrupted", ref.ID)
			if err := r.Start(ctx, runtime.StartParams{Ref: ref, RootFS: env.rootfs, AgentBinary: env.agent, Hostname: ref.ID}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := r.Destroy(context.Background(), ref); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			})
			c := connect(t, r, ref)
			if _, err := c.WriteFile(ctx, "/root/kept", strings.NewReader("kept\n"), 0o600, ""); err != nil {
				t.Fatal(err)
			}
			if err := c.EndSession(ctx); err != nil {
				t.Fatal(err)
			}
			c.Close()
			tt.after(t, ref)
			// The next daemon.
			st, err := r.Status(ctx, ref)
			if err != nil || st != tt.want {
				t.Fatalf("status: %q %v, want %q", st, err, tt.want)
			}
			if st == runtime.StatePaused {
				if err := r.Resume(ctx, ref); err != nil {
					t.Fatal(err)
				}
			}
			c = connect(t, r, ref)
			defer c.Close()
			rc, _, err := c.ReadFile(ctx, "/root/kept", "")
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if b, _ := io.ReadAll(rc); string(b) != "kept\n" {
				t.Errorf("the file reads %q", b)
			}
			for _, f := range []string{pausedFile, stateFile, replugFile} {
				if _, err := os.Stat(filepath.Join(ref.Dir, f)); err == nil {
					t.Errorf("%s is left in the directory of a running guest", f)
				}
			}
		})
	}
}

// connect dials the guest's agent and speaks its protocol.
func connect(t *testing.T, r *Runtime, ref runtime.Ref) *agentapi.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := agentapi.Connect(ctx, func(ctx context.Context) (net.Conn, error) { return r.Dial(ctx, ref) })
	if err != nil {
		t.Fatalf("connecting to the agent of %s: %v", ref.ID, err)
	}
	return c
}
