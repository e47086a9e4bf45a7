package gvisor

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/runtime"
	"corral/internal/testwait"
)

// A daemon killed in the middle of a pause or a memory snapshot leaves the
// sandbox in one of a few states; the next daemon must find each one
// running or paused, with its files, never stopped. Each case below is
// the state a kill at one point leaves, made by hand with the real agent.
func TestInterruptedSave(t *testing.T) {
	r := newRuntime(t)
	agent := realAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	image := func(ref runtime.Ref) string { return filepath.Join(ref.Dir, checkpointDirName) }
	tests := []struct {
		name  string
		after func(t *testing.T, ref runtime.Ref) // what the killed daemon got done after ending the session
		want  runtime.State
	}{
		// Killed before the runtime marked the sandbox for a relisten.
		{"session ended", func(*testing.T, runtime.Ref) {}, runtime.StateRunning},
		// Killed once the checkpoint was written, before the pause ended
		// the container.
		{"image written", func(t *testing.T, ref runtime.Ref) {
			if err := r.checkpoint(ctx, ref, image(ref), true); err != nil {
				t.Fatal(err)
			}
		}, runtime.StateRunning},
		{"image marked", func(t *testing.T, ref runtime.Ref) {
			if err := r.checkpoint(ctx, ref, image(ref), true); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ref.Dir, pausedFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, runtime.StateRunning},
		// Killed while the pause ended the container: runsc still knows it.
		{"container killed", func(t *testing.T, ref runtime.Ref) {
			if err := r.checkpoint(ctx, ref, image(ref), true); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ref.Dir, pausedFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(env.runsc, "--root", filepath.Join(env.base, "runsc"), "kill", "--all", ref.ID, "KILL").CombinedOutput(); err != nil {
				t.Fatalf("runsc kill: %v %s", err, out)
			}
			waitStopped(t, r, ref)
		}, runtime.StatePaused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := startWith(t, r, agent)
			c := connect(t, r, ref)
			if _, err := c.WriteFile(ctx, "/root/kept", strings.NewReader("kept\n"), 0o600, ""); err != nil {
				t.Fatal(err)
			}
			if err := c.EndSession(ctx); err != nil {
				t.Fatal(err)
			}
			c.Close()
			if err := waitReleased(ctx, filepath.Join(ref.Dir, chanDirName, agentSocket)); err != nil {
				t.Fatal(err)
			}
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
		})
	}
}

// realAgent builds the guest agent (cmd/corral) once for the package's
// tests and returns its path.
func realAgent(t *testing.T) string {
	t.Helper()
	agent := filepath.Join(env.base, "corral-agent")
	if _, err := os.Stat(agent); err != nil {
		build := exec.Command("go", "build", "-o", agent, "corral/cmd/corral")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the agent: %v\n%s", err, out)
		}
	}
	return agent
}

// startWith starts a sandbox running agent, destroyed when the test ends.
func startWith(t *testing.T, r *Runtime, agent string) runtime.Ref {
	t.Helper()
	ref := newRef()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Start(ctx, runtime.StartParams{Ref: ref, RootFS: env.rootfs, AgentBinary: agent, Hostname: ref.ID}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Destroy(context.Background(), ref); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ref
}

// connect dials the sandbox's agent and speaks its protocol.
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

// waitStopped waits until the container's processes are gone, as runsc's
// state and Status both see it: once in CI, under load, runsc's state
// read "stopped" and the next read, Status's, "running" (the cause is not
// found), so the next daemon is modelled as starting once they agree.
func waitStopped(t *testing.T, r *Runtime, ref runtime.Ref) {
	t.Helper()
	testwait.For(t, 10*time.Second, ref.ID+" to stop", func() bool {
		out, err := r.runsc(context.Background(), commandTimeout, "", "state", ref.ID)
		if err != nil || !strings.Contains(string(out), `"stopped"`) {
			return false
		}
		st, err := r.Status(context.Background(), ref)
		return err == nil && st != runtime.StateRunning
	})
}
