package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/records"
	"corral/internal/runtime"
	"corral/internal/runtime/inproc"
	"corral/internal/sandbox"
	"corral/internal/seal"
)

// env is a manager over a real store and the in-process runtime.
type env struct {
	t     *testing.T
	dir   string
	rt    *inproc.Runtime
	store *records.Store
	m     *Manager
	edit  func(*Config) // changes to the managers' configuration
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv whose managers' configuration edit changes.
func newEnvWith(t *testing.T, edit func(*Config)) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "mgr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	st, err := records.Open(context.Background(), filepath.Join(dir, "corral.db"), seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, dir: dir, rt: inproc.New("gvisor"), store: st, edit: edit}
	e.m = e.open()
	return e
}

// open starts a manager over the env's store and runtime (a daemon start).
func (e *env) open() *Manager {
	e.t.Helper()
	cfg := Config{
		StateDir: e.dir, BaseRootFS: "/", AgentBinary: "/proc/self/exe", Records: e.store,
		Runtimes: map[string]runtime.Runtime{"gvisor": e.rt}, MaxSandboxes: 4,
		Logger: slog.New(slog.DiscardHandler), AgentTimeout: 10 * time.Second,
	}
	if e.edit != nil {
		e.edit(&cfg)
	}
	m, err := New(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Close)
	return m
}

func (e *env) create(spec sandbox.Spec) *sandbox.Sandbox {
	e.t.Helper()
	spec.User = or(spec.User, selfUser())
	sb, err := e.m.Create(context.Background(), spec)
	if err != nil {
		e.t.Fatal(err)
	}
	return sb
}

func (e *env) wait(id string) (int, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, reason, err := e.m.Wait(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return code, reason
}

// run execs a command and returns its stdout and exit code.
func (e *env) run(id string, args ...string) (string, int) {
	e.t.Helper()
	p, err := e.m.Processes().Exec(context.Background(), id, ExecParams{Args: args})
	if err != nil {
		e.t.Fatal(err)
	}
	defer p.Close()
	var out strings.Builder
	for {
		ev, err := p.Recv()
		if errors.Is(err, io.EOF) {
			e.t.Fatal("stream ended without an end event")
		}
		if err != nil {
			e.t.Fatal(err)
		}
		switch ev.Type {
		case agentapi.EventStdout:
			out.Write(ev.Data)
		case agentapi.EventEnd:
			return out.String(), ev.ExitCode
		}
	}
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	sb := e.create(sandbox.Spec{})
	if sb.State != sandbox.Running || sb.Spec.Runtime != "gvisor" || !sb.Spec.Network.BlockNetwork {
		t.Fatalf("created: %+v", sb)
	}
	if out, code := e.run(sb.ID, "echo", "hi"); out != "hi\n" || code != 0 {
		t.Fatalf("exec: %q %d", out, code)
	}
	rec, err := e.m.Terminate(context.Background(), sb.ID, sandbox.EndTerminated, nil)
	if err != nil || rec.State != sandbox.Terminated || *rec.ExitCode != 137 {
		t.Fatalf("terminate: %+v %v", rec, err)
	}
	if !e.rt.Destroyed(sb.ID) {
		t.Error("the runtime was not asked to destroy the sandbox")
	}
	if code, reason := e.wait(sb.ID); code != 137 || reason != sandbox.EndTerminated {
		t.Errorf("wait: %d %s", code, reason)
	}
	stored, err := e.store.GetSandbox(context.Background(), sb.ID)
	if err != nil || stored.State != sandbox.Terminated {
		t.Errorf("stored record: %+v %v", stored, err)
	}
	if _, err := e.m.Processes().Exec(context.Background(), sb.ID, ExecParams{Args: []string{"true"}}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("exec in a terminated sandbox: %v", err)
	}
	// Terminating again is a no-op returning the final record.
	if rec, err := e.m.Terminate(context.Background(), sb.ID, sandbox.EndTimeout, nil); err != nil || rec.EndReason != sandbox.EndTerminated {
		t.Errorf("second terminate: %+v %v", rec, err)
	}
}

func TestStartFailureRollsBack(t *testing.T) {
	e := newEnv(t)
	e.rt.FailStarts(errors.New("runsc create: boom"))
	_, err := e.m.Create(context.Background(), sandbox.Spec{})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("create: %v", err)
	}
	all, _ := e.m.List(context.Background())
	if len(all) != 1 || all[0].State != sandbox.Failed || !strings.Contains(all[0].Error, "boom") {
		t.Fatalf("records after a failed create: %+v", all)
	}
	if !e.rt.Destroyed(all[0].ID) {
		t.Error("the failed create was not rolled back")
	}
}

func TestEndings(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		spec   sandbox.Spec
		crash  bool
		code   int
		reason string
	}{
		{"entrypoint exit", sandbox.Spec{Entrypoint: []string{"sh", "-c", "exit 3"}}, false, 3, sandbox.EndExited},
		{"lifetime timeout", sandbox.Spec{Timeout: time.Second}, false, 124, sandbox.EndTimeout},
		{"idle timeout", sandbox.Spec{IdleTimeout: time.Second}, false, 124, sandbox.EndIdleTimeout},
		// A runtime that cannot pause ends it as the timeout would
		// (test/e2e's TestE2BAutoResume pauses a real one).
		{"pause on timeout, unpausable", sandbox.Spec{Timeout: time.Second, PauseOnTimeout: true}, false, 124, sandbox.EndTimeout},
		{"agent lost", sandbox.Spec{}, true, 137, sandbox.EndCrashed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := e.create(tt.spec)
			if tt.crash {
				e.rt.Crash(sb.ID)
			}
			if code, reason := e.wait(sb.ID); code != tt.code || reason != tt.reason {
				t.Errorf("wait: %d %s, want %d %s", code, reason, tt.code, tt.reason)
			}
			if !e.rt.Destroyed(sb.ID) {
				t.Error("not destroyed")
			}
		})
	}
}

func TestAdmission(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 4; i++ {
		e.create(sandbox.Spec{})
	}
	if _, err := e.m.Create(context.Background(), sandbox.Spec{}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("fifth create: %v", err)
	}
	if _, err := e.m.Create(context.Background(), sandbox.Spec{Runtime: "vm"}); !errors.Is(err, errdefs.ErrNotSupported) {
		t.Errorf("vm create: %v", err)
	}
}

// A restarted manager adopts what still runs, ends what does not, and
// destroys what it has no record of.
func TestReconcile(t *testing.T) {
	e := newEnv(t)
	alive := e.create(sandbox.Spec{})
	gone := e.create(sandbox.Spec{})
	e.m.Close() // the daemon stops; sandboxes keep running
	e.rt.Crash(gone.ID)
	// A record left in creating, and a runtime sandbox with no record.
	half := &sandbox.Sandbox{ID: ids.NewSandbox(), State: sandbox.Creating, CreatedAt: time.Now(), Spec: alive.Spec}
	half.Dir = filepath.Join(e.dir, "sandboxes", half.ID)
	if err := e.store.PutSandbox(context.Background(), half); err != nil {
		t.Fatal(err)
	}
	orphan := ids.NewSandbox()
	if err := e.rt.Start(context.Background(), runtime.StartParams{Ref: runtime.Ref{ID: orphan, Dir: filepath.Join(e.dir, "sandboxes", orphan)}}); err != nil {
		t.Fatal(err)
	}

	e.m = e.open()
	if out, code := e.run(alive.ID, "echo", "adopted"); out != "adopted\n" || code != 0 {
		t.Errorf("adopted sandbox: %q %d", out, code)
	}
	for id, want := range map[string]string{gone.ID: sandbox.EndLost, half.ID: sandbox.EndFailed} {
		rec, err := e.m.Get(context.Background(), id)
		if err != nil || !rec.State.Terminal() || rec.EndReason != want {
			t.Errorf("%s after reconcile: %+v %v, want ended %s", id, rec, err, want)
		}
	}
	if !e.rt.Destroyed(orphan) {
		t.Error("the orphan was not destroyed")
	}
}

// A build's sandbox does not outlive the daemon that ran the build: a
// restarted daemon ends it (the build ended with the daemon, and no one
// else knows the sandbox), and adopts the others.
func TestReconcileEndsBuildSandboxes(t *testing.T) {
	e := newEnv(t)
	build := e.create(sandbox.Spec{Tags: map[string]string{BuildStepTag: "1"}})
	other := e.create(sandbox.Spec{Tags: map[string]string{"step": "1"}})
	e.m.Close()
	e.m = e.open()
	ctx := context.Background()
	if rec, err := e.m.Get(ctx, build.ID); err != nil || rec.State != sandbox.Terminated {
		t.Errorf("the build sandbox after a restart: %+v %v", rec, err)
	}
	if !e.rt.Destroyed(build.ID) {
		t.Error("the build sandbox was not destroyed")
	}
	if rec, err := e.m.Get(ctx, other.ID); err != nil || rec.State != sandbox.Running {
		t.Errorf("another sandbox after a restart: %+v %v", rec, err)
	}
}

// selfUser is the user the in-process agent can run processes as: root
// when the tests run as root, else the test's own uid (an unprivileged
// agent cannot switch users).
func selfUser() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return fmt.Sprint(os.Geteuid())
}

// A daemon default CA that is not a PEM certificate stops the daemon at
// start, naming the flag, before anything is touched.
func TestNewRefusesBadDefaultCA(t *testing.T) {
	_, err := New(context.Background(), Config{CACerts: []string{"not a certificate"}})
	if err == nil || !strings.Contains(err.Error(), "--ca-cert[0]") {
		t.Fatalf("New with a junk CA: %v", err)
	}
}
