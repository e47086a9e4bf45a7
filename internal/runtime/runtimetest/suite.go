// Package runtimetest is the conformance suite of the runtime contract: the
// same tests, through the real guest agent, for every backend (gvisor now,
// vm next). A backend's test calls Run with a factory; every test starts
// real sandboxes and checks that nothing is left behind.
//
// It imports the runtime contract and the agent protocol, never a backend.
package runtimetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/ids"
	"corral/internal/runtime"
)

// Env is what the suite needs from a backend's test.
type Env struct {
	// Runtime under test.
	Runtime runtime.Runtime
	// RootFS and AgentBinary for StartParams.
	RootFS      string
	AgentBinary string
	// Dir holds the per-sandbox directories.
	Dir string
	// Leftovers lists what the host still has of a destroyed sandbox
	// (processes, mounts, cgroups, files); empty means nothing leaked.
	Leftovers func(ref runtime.Ref) []string
}

// sandbox is one started sandbox with a connected agent.
type sandbox struct {
	ref    runtime.Ref
	client *agentapi.Client
}

func start(t *testing.T, e Env, res runtime.Resources) *sandbox {
	t.Helper()
	id := ids.NewSandbox()
	ref := runtime.Ref{ID: id, Dir: filepath.Join(e.Dir, id)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := runtime.StartParams{Ref: ref, RootFS: e.RootFS, AgentBinary: e.AgentBinary, Resources: res, Hostname: id}
	if err := e.Runtime.Start(ctx, p); err != nil {
		t.Fatalf("starting %s: %v", id, err)
	}
	t.Cleanup(func() {
		if err := e.Runtime.Destroy(context.Background(), ref); err != nil {
			t.Errorf("destroying %s: %v", id, err)
		}
	})
	conn, err := e.Runtime.Dial(ctx, ref)
	if err != nil {
		t.Fatalf("dialing %s: %v", id, err)
	}
	c, err := agentapi.NewClient(ctx, conn)
	if err != nil {
		t.Fatalf("agent handshake in %s: %v", id, err)
	}
	t.Cleanup(func() { c.Close() })
	return &sandbox{ref: ref, client: c}
}

// result is a finished process.
type result struct {
	stdout, stderr string
	code           int
	signal         string
}

func run(t *testing.T, s *sandbox, req agentapi.StartRequest, stdin string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req.Stdin = stdin != ""
	st, err := s.client.Start(ctx, req)
	if err != nil {
		t.Fatalf("starting %v: %v", req.Args, err)
	}
	defer st.Close()
	var out, errb bytes.Buffer
	var res result
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%v: %v", req.Args, err)
		}
		switch ev.Type {
		case agentapi.EventStart:
			if stdin != "" {
				go s.client.Stdin(ctx, ev.PID, strings.NewReader(stdin), true)
			}
		case agentapi.EventStdout, agentapi.EventPTY:
			out.Write(ev.Data)
		case agentapi.EventStderr:
			errb.Write(ev.Data)
		case agentapi.EventEnd:
			res.code, res.signal = ev.ExitCode, ev.Signal
		}
	}
	res.stdout, res.stderr = out.String(), errb.String()
	return res
}

// Run runs the conformance suite against e.
func Run(t *testing.T, e Env) {
	t.Run("ExecStreamsAndExitCodes", func(t *testing.T) { testExec(t, e) })
	t.Run("Signals", func(t *testing.T) { testSignals(t, e) })
	t.Run("PTY", func(t *testing.T) { testPTY(t, e) })
	t.Run("Files", func(t *testing.T) { testFiles(t, e) })
	t.Run("ExportChanges", func(t *testing.T) { testExportChanges(t, e) })
	if p, ok := e.Runtime.(runtime.Pauser); ok {
		t.Run("PauseResume", func(t *testing.T) { testPauseResume(t, e, p) })
	}
	if sn, ok := e.Runtime.(runtime.Snapshotter); ok {
		t.Run("SnapshotCopies", func(t *testing.T) { testSnapshotCopies(t, e, sn) })
	}
	if m, ok := e.Runtime.(runtime.Meter); ok {
		t.Run("Meter", func(t *testing.T) { testMeter(t, e, m) })
	}
	t.Run("Watch", func(t *testing.T) { testWatch(t, e) })
	t.Run("MemoryLimit", func(t *testing.T) { testMemoryLimit(t, e) })
	t.Run("DestroyLeavesNothing", func(t *testing.T) { testDestroy(t, e) })
}

func testExec(t *testing.T, e Env) {
	s := start(t, e, runtime.Resources{})
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  result
	}{
		{"stdout", []string{"echo", "hi"}, "", result{stdout: "hi\n"}},
		{"streams apart", []string{"sh", "-c", "echo out; echo err >&2"}, "", result{stdout: "out\n", stderr: "err\n"}},
		{"exit code", []string{"sh", "-c", "exit 7"}, "", result{code: 7}},
		{"stdin", []string{"cat"}, "hello\n", result{stdout: "hello\n"}},
		{"python", []string{"python3", "-c", "print(6*7)"}, "", result{stdout: "42\n"}},
		{"env and cwd", []string{"sh", "-c", "echo $FOO; pwd"}, "", result{stdout: "bar\n/tmp\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := agentapi.StartRequest{Args: tt.args}
			if tt.name == "env and cwd" {
				req.Env, req.Cwd = map[string]string{"FOO": "bar"}, "/tmp"
			}
			got := run(t, s, req, tt.stdin)
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func testSignals(t *testing.T, e Env) {
	s := start(t, e, runtime.Resources{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := s.client.Start(ctx, agentapi.StartRequest{Args: []string{"sh", "-c", "sleep 100 & sleep 100"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev, err := st.Recv()
	if err != nil || ev.Type != agentapi.EventStart {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	if err := s.client.Signal(ctx, ev.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err = st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agentapi.EventEnd {
			break
		}
	}
	if ev.ExitCode != 137 || ev.Signal != "SIGKILL" {
		t.Errorf("end after SIGKILL: %+v", ev)
	}
	if got := run(t, s, agentapi.StartRequest{Args: []string{"sh", "-c", "ps -eo args | grep -c '^sleep 100' || true"}}, ""); strings.TrimSpace(got.stdout) != "0" {
		t.Errorf("the group's background child survived: %q", got.stdout)
	}
}

func testPTY(t *testing.T, e Env) {
	s := start(t, e, runtime.Resources{})
	got := run(t, s, agentapi.StartRequest{Args: []string{"sh", "-c", "tty; stty size"}, PTY: &agentapi.PTYSize{Cols: 91, Rows: 33}}, "")
	if !strings.Contains(got.stdout, "/dev/pts/") || !strings.Contains(got.stdout, "33 91") {
		t.Errorf("pty: %q", got.stdout)
	}
}

func testFiles(t *testing.T, e Env) {
	s := start(t, e, runtime.Resources{MemoryLimitMB: 1024})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := make([]byte, 8<<20)
	rand.Read(data)
	if _, err := s.client.WriteFile(ctx, "/root/d/blob", bytes.NewReader(data), 0o600, ""); err != nil {
		t.Fatal(err)
	}
	r, n, err := s.client.ReadFile(ctx, "/root/d/blob", "")
	if err != nil {
		t.Fatal(err)
	}
	back, _ := io.ReadAll(r)
	r.Close()
	if n != int64(len(data)) || !bytes.Equal(back, data) {
		t.Fatalf("read back %d bytes (said %d), want the %d written", len(back), n, len(data))
	}
	if got := run(t, s, agentapi.StartRequest{Args: []string{"sha256sum", "/root/d/blob"}}, ""); !strings.Contains(got.stdout, "/root/d/blob") {
		t.Errorf("the guest does not see the file: %+v", got)
	}
	// A symlink the guest made to / resolves inside the sandbox.
	run(t, s, agentapi.StartRequest{Args: []string{"ln", "-s", "/", "/tmp/up"}}, "")
	if _, err := s.client.WriteFile(ctx, "/tmp/up/etc/conformance-marker", strings.NewReader("x"), 0o644, ""); err != nil {
		t.Fatal(err)
	}
	if got := run(t, s, agentapi.StartRequest{Args: []string{"cat", "/etc/conformance-marker"}}, ""); got.stdout != "x" {
		t.Errorf("write through the guest's symlink landed elsewhere: %+v", got)
	}
}

func testMemoryLimit(t *testing.T, e Env) {
	s := start(t, e, runtime.Resources{MemoryLimitMB: 256})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := s.client.Start(ctx, agentapi.StartRequest{Args: []string{"python3", "-c", "b = bytearray(600 << 20); b[::4096] = b'x' * len(b[::4096]); print('allocated')"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out bytes.Buffer
	var end agentapi.Event
	for {
		ev, err := st.Recv()
		if err != nil {
			break // the sandbox may die whole: that is containment too
		}
		if ev.Type == agentapi.EventStdout {
			out.Write(ev.Data)
		}
		if ev.Type == agentapi.EventEnd {
			end = ev
		}
	}
	if strings.Contains(out.String(), "allocated") && end.ExitCode == 0 {
		t.Fatalf("600 MiB allocated under a 256 MiB limit")
	}
}

func testDestroy(t *testing.T, e Env) {
	for i := 0; i < 3; i++ {
		s := start(t, e, runtime.Resources{})
		run(t, s, agentapi.StartRequest{Args: []string{"sh", "-c", "(trap '' TERM; sleep 1000) & echo started"}}, "")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := e.Runtime.Destroy(ctx, s.ref); err != nil {
			t.Fatal(err)
		}
		cancel()
		if st, err := e.Runtime.Status(context.Background(), s.ref); err != nil || st != runtime.StateAbsent {
			t.Errorf("status after destroy: %v, %v", st, err)
		}
		if left := e.Leftovers(s.ref); len(left) > 0 {
			t.Errorf("left behind by %s:\n%s", s.ref.ID, strings.Join(left, "\n"))
		}
	}
}
