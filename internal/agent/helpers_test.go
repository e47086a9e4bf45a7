package agent

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/testwait"
)

// fuzzCoordinator is set in the process that coordinates `go test -fuzz`:
// it waits for its worker processes with os/exec, which the agent's reaper
// (wait4 on any child) would break, so the tests that start it skip there.
var fuzzCoordinator bool

func TestMain(m *testing.M) {
	flag.Parse()
	fuzz, worker := flag.Lookup("test.fuzz"), flag.Lookup("test.fuzzworker")
	fuzzCoordinator = fuzz != nil && fuzz.Value.String() != "" &&
		(worker == nil || worker.Value.String() != "true")
	if !fuzzCoordinator {
		// Like the agent in production, adopt orphans (the background
		// children of test processes) so that the reaper, not the host's
		// init, reaps them.
		if err := becomeInit(); err != nil {
			fmt.Fprintln(os.Stderr, "cannot become a child subreaper:", err)
		}
		startReaper()
	}
	os.Exit(m.Run())
}

// skipInFuzzCoordinator skips tests that start the agent's reaper.
func skipInFuzzCoordinator(t *testing.T) {
	if fuzzCoordinator {
		t.Skip("the agent's reaper would reap the fuzzing workers; fuzz with -run '^$'")
	}
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: switches users and creates files owned by others")
	}
}

// asSelf fills in the user of a request that names none. The agent's
// default is root, and an agent that is not root can only run processes as
// itself, so tests that do not care who runs their processes ask for the
// test's own uid:gid when they are not root.
func asSelf(req agentapi.StartRequest) agentapi.StartRequest {
	if req.User == "" && os.Geteuid() != 0 {
		req.User = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	}
	return req
}

// testEnv is an agent served in-process on a unix socket, and a real client.
type testEnv struct {
	srv  *Server
	c    *agentapi.Client
	sock string
	root string
}

// newEnv serves an agent with the given root ("" is "/") and connects to it.
// At the end of the test every process it started is killed and awaited.
func newEnv(t *testing.T, root string) *testEnv {
	t.Helper()
	skipInFuzzCoordinator(t)
	if root == "" {
		root = "/"
	}
	dir, err := os.MkdirTemp("", "ag")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := New(Config{Root: root, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	env := &testEnv{srv: srv, sock: sock, root: root}
	env.c = env.dial(t)
	t.Cleanup(func() {
		env.c.Close()
		srv.KillAll()
		waitFor(t, "processes to end", func() bool { return retired(srv) })
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return env
}

// retired reports whether every process the server started has ended and
// delivered its output.
func retired(srv *Server) bool {
	srv.procs.mu.Lock()
	defer srv.procs.mu.Unlock()
	return len(srv.procs.running) == 0
}

// dial opens another client connection to the agent.
func (e *testEnv) dial(t *testing.T) *agentapi.Client {
	t.Helper()
	conn, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentapi.NewClient(testCtx(t), conn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testCtx bounds a test's calls so that a hang fails instead of stalling.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor fails t unless cond holds within 10 seconds (testwait.For).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

// result is everything a process stream carried.
type result struct {
	pid            int
	stdout, stderr bytes.Buffer
	pty            bytes.Buffer
	end            agentapi.Event
}

// collect reads a stream to its end.
func collect(t *testing.T, s *agentapi.Stream) *result {
	t.Helper()
	defer s.Close()
	res := &result{}
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return res
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		res.add(t, ev)
	}
}

func (r *result) add(t *testing.T, ev agentapi.Event) {
	switch ev.Type {
	case agentapi.EventStart:
		r.pid = ev.PID
	case agentapi.EventStdout:
		r.stdout.Write(ev.Data)
	case agentapi.EventStderr:
		r.stderr.Write(ev.Data)
	case agentapi.EventPTY:
		r.pty.Write(ev.Data)
	case agentapi.EventEnd:
		r.end = ev
	default:
		t.Fatalf("unexpected event %+v", ev)
	}
	if len(ev.Data) > agentapi.MaxChunk {
		t.Fatalf("event of %d bytes, more than %d", len(ev.Data), agentapi.MaxChunk)
	}
}

// run starts a process and collects its whole stream.
func (e *testEnv) run(t *testing.T, req agentapi.StartRequest) *result {
	t.Helper()
	s, err := e.c.Start(testCtx(t), asSelf(req))
	if err != nil {
		t.Fatalf("Start(%q): %v", req.Args, err)
	}
	return collect(t, s)
}

// startPID starts a process and returns its stream after the start event.
func (e *testEnv) startPID(t *testing.T, req agentapi.StartRequest) (*agentapi.Stream, int) {
	t.Helper()
	s, err := e.c.Start(testCtx(t), asSelf(req))
	if err != nil {
		t.Fatalf("Start(%q): %v", req.Args, err)
	}
	ev, err := s.Recv()
	if err != nil || ev.Type != agentapi.EventStart || ev.PID <= 0 {
		t.Fatalf("first event = %+v, %v; want start", ev, err)
	}
	return s, ev.PID
}

// recvUntil reads events into res until the stream's output contains want.
func recvUntil(t *testing.T, s *agentapi.Stream, res *result, want string) {
	t.Helper()
	for !strings.Contains(res.stdout.String()+res.pty.String(), want) {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("waiting for %q (have %q): %v", want, res.stdout.String()+res.pty.String(), err)
		}
		res.add(t, ev)
	}
}

// groupMembers lists the live (non-zombie) processes in process group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && unix.Kill(pid, 0) == nil
}
