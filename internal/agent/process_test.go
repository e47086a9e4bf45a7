package agent

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

func TestProcessExitCodes(t *testing.T) {
	env := newEnv(t, "")
	tests := []struct {
		name     string
		args     []string
		code     int
		signal   string
		timedOut bool
		timeout  int64
	}{
		{name: "true", args: []string{"true"}, code: 0},
		{name: "false", args: []string{"false"}, code: 1},
		{name: "exit 7", args: []string{"sh", "-c", "exit 7"}, code: 7},
		{name: "sigterm", args: []string{"sh", "-c", "kill -TERM $$"}, code: 143, signal: "SIGTERM"},
		{name: "sigkill", args: []string{"sh", "-c", "kill -KILL $$"}, code: 137, signal: "SIGKILL"},
		{name: "timeout", args: []string{"sleep", "100"}, timeout: 200, code: 124, signal: "SIGKILL", timedOut: true},
		{name: "within timeout", args: []string{"true"}, timeout: 10_000, code: 0},
		{name: "absolute path", args: []string{"/bin/sh", "-c", "exit 3"}, code: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := env.run(t, agentapi.StartRequest{Args: tt.args, TimeoutMS: tt.timeout})
			end := res.end
			if end.Type != agentapi.EventEnd || end.ExitCode != tt.code || end.Signal != tt.signal || end.TimedOut != tt.timedOut {
				t.Fatalf("end = %+v; want exit %d signal %q timed_out %v", end, tt.code, tt.signal, tt.timedOut)
			}
			if res.pid <= 0 {
				t.Fatalf("no start event")
			}
		})
	}
}

func TestProcessStartErrors(t *testing.T) {
	env := newEnv(t, "")
	tests := []struct {
		name string
		req  agentapi.StartRequest
		kind error
	}{
		{"no args", agentapi.StartRequest{}, errdefs.ErrInvalidArgument},
		{"missing executable", agentapi.StartRequest{Args: []string{"corral-no-such-binary"}}, errdefs.ErrNotFound},
		{"not executable", agentapi.StartRequest{Args: []string{"/etc/passwd"}}, errdefs.ErrPermissionDenied},
		{"bad cwd", agentapi.StartRequest{Args: []string{"true"}, Cwd: "/corral/no/such/dir"}, errdefs.ErrInvalidArgument},
		{"cwd is a file", agentapi.StartRequest{Args: []string{"true"}, Cwd: "/etc/passwd"}, errdefs.ErrInvalidArgument},
		{"bad user", agentapi.StartRequest{Args: []string{"true"}, User: "corral-no-such-user"}, errdefs.ErrInvalidArgument},
		{"bad gid", agentapi.StartRequest{Args: []string{"true"}, User: "0:x"}, errdefs.ErrInvalidArgument},
		{"nul in arg", agentapi.StartRequest{Args: []string{"echo", "a\x00b"}}, errdefs.ErrInvalidArgument},
		{"bad env", agentapi.StartRequest{Args: []string{"true"}, Env: map[string]string{"A=B": "c"}}, errdefs.ErrInvalidArgument},
		{"negative timeout", agentapi.StartRequest{Args: []string{"true"}, TimeoutMS: -1}, errdefs.ErrInvalidArgument},
		{"zero pty", agentapi.StartRequest{Args: []string{"true"}, PTY: &agentapi.PTYSize{}}, errdefs.ErrInvalidArgument},
		{"oversize body", agentapi.StartRequest{Args: []string{"true"},
			Env: map[string]string{"BIG": strings.Repeat("x", 2<<20)}}, errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := env.c.Start(testCtx(t), tt.req)
			if err == nil {
				s.Close()
				t.Fatalf("Start succeeded; want %v", tt.kind)
			}
			if !errors.Is(err, tt.kind) {
				t.Fatalf("Start: %v; want %v", err, tt.kind)
			}
		})
	}
}

func TestProcessOutput(t *testing.T) {
	env := newEnv(t, "")
	big := 300_000
	tests := []struct {
		name           string
		args           []string
		stdout, stderr string
	}{
		{"separate streams", []string{"sh", "-c", "echo out; echo err >&2"}, "out\n", "err\n"},
		{"no output", []string{"true"}, "", ""},
		{"large output in chunks", []string{"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a"}, strings.Repeat("a", big), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := env.run(t, agentapi.StartRequest{Args: tt.args})
			if res.stdout.String() != tt.stdout || res.stderr.String() != tt.stderr {
				t.Fatalf("stdout %d bytes %.40q, stderr %q; want %d bytes %.40q, %q",
					res.stdout.Len(), res.stdout.String(), res.stderr.String(), len(tt.stdout), tt.stdout, tt.stderr)
			}
		})
	}
}

func TestProcessEnvCwdUser(t *testing.T) {
	requireRoot(t)
	env := newEnv(t, "")
	tests := []struct {
		name string
		req  agentapi.StartRequest
		want string
	}{
		{"env var", agentapi.StartRequest{Args: []string{"sh", "-c", "echo $FOO"}, Env: map[string]string{"FOO": "bar"}}, "bar"},
		{"env overrides agent", agentapi.StartRequest{Args: []string{"sh", "-c", "echo $HOME"}, Env: map[string]string{"HOME": "/x"}}, "/x"},
		{"agent env inherited", agentapi.StartRequest{Args: []string{"sh", "-c", "test -n \"$PATH\" && echo ok"}}, "ok"},
		{"cwd", agentapi.StartRequest{Args: []string{"pwd"}, Cwd: "/tmp"}, "/tmp"},
		{"default cwd is home", agentapi.StartRequest{Args: []string{"pwd"}}, "/root"},
		{"root", agentapi.StartRequest{Args: []string{"id", "-u"}}, "0"},
		{"root home", agentapi.StartRequest{Args: []string{"sh", "-c", "echo $HOME $USER"}}, "/root root"},
		{"nobody by name", agentapi.StartRequest{Args: []string{"id", "-u"}, User: "nobody"}, "65534"},
		{"nobody env", agentapi.StartRequest{Args: []string{"sh", "-c", "echo $HOME $USER"}, User: "nobody"}, "/nonexistent nobody"},
		{"nobody cwd falls back to /", agentapi.StartRequest{Args: []string{"pwd"}, User: "nobody"}, "/"},
		{"nobody groups", agentapi.StartRequest{Args: []string{"id", "-G"}, User: "nobody"}, "65534"},
		{"uid", agentapi.StartRequest{Args: []string{"id", "-u"}, User: "65534"}, "65534"},
		{"uid:gid", agentapi.StartRequest{Args: []string{"sh", "-c", "echo $(id -u):$(id -g)"}, User: "65534:4242"}, "65534:4242"},
		{"unknown uid", agentapi.StartRequest{Args: []string{"sh", "-c", "echo $(id -u):$(id -g) $HOME"}, User: "4321"}, "4321:0 /"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := env.run(t, tt.req)
			if got := strings.TrimSpace(res.stdout.String()); got != tt.want || res.end.ExitCode != 0 {
				t.Fatalf("output %q (stderr %q, exit %d); want %q", got, res.stderr.String(), res.end.ExitCode, tt.want)
			}
		})
	}
}

func TestProcessStdin(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	t.Run("round trip with close", func(t *testing.T) {
		s, pid := env.startPID(t, agentapi.StartRequest{Args: []string{"cat"}, Stdin: true})
		input := bytes.Repeat([]byte("hello stdin\n"), 20_000)
		if err := env.c.Stdin(ctx, pid, bytes.NewReader(input), true); err != nil {
			t.Fatal(err)
		}
		res := collect(t, s)
		if !bytes.Equal(res.stdout.Bytes(), input) || res.end.ExitCode != 0 {
			t.Fatalf("cat echoed %d bytes, exit %d; want %d bytes", res.stdout.Len(), res.end.ExitCode, len(input))
		}
	})
	t.Run("two writes then close-stdin", func(t *testing.T) {
		s, pid := env.startPID(t, agentapi.StartRequest{Args: []string{"cat"}, Stdin: true})
		for _, part := range []string{"one ", "two"} {
			if err := env.c.Stdin(ctx, pid, strings.NewReader(part), false); err != nil {
				t.Fatal(err)
			}
		}
		if err := env.c.CloseStdin(ctx, pid); err != nil {
			t.Fatal(err)
		}
		if err := env.c.CloseStdin(ctx, pid); !errors.Is(err, errdefs.ErrFailedPrecondition) && !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("second CloseStdin: %v; want failed_precondition (or not_found once exited)", err)
		}
		if res := collect(t, s); res.stdout.String() != "one two" {
			t.Fatalf("cat echoed %q", res.stdout.String())
		}
	})
	t.Run("no stdin means /dev/null", func(t *testing.T) {
		res := env.run(t, agentapi.StartRequest{Args: []string{"cat"}})
		if res.stdout.Len() != 0 || res.end.ExitCode != 0 {
			t.Fatalf("cat without stdin: %q exit %d", res.stdout.String(), res.end.ExitCode)
		}
	})
}

func TestProcessPTY(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	t.Run("tty", func(t *testing.T) {
		res := env.run(t, agentapi.StartRequest{Args: []string{"tty"}, PTY: &agentapi.PTYSize{Cols: 80, Rows: 24}})
		if !regexp.MustCompile(`^/dev/pts/\d+\r?\n$`).MatchString(res.pty.String()) || res.end.ExitCode != 0 {
			t.Fatalf("tty printed %q, exit %d", res.pty.String(), res.end.ExitCode)
		}
		if res.stdout.Len() != 0 || res.stderr.Len() != 0 {
			t.Fatalf("pty process produced stdout/stderr events")
		}
	})
	t.Run("size and resize", func(t *testing.T) {
		s, pid := env.startPID(t, agentapi.StartRequest{
			Args: []string{"sh", "-c", "stty size; read x; stty size"},
			PTY:  &agentapi.PTYSize{Cols: 80, Rows: 24},
		})
		res := &result{}
		recvUntil(t, s, res, "24 80")
		if err := env.c.Resize(ctx, pid, 100, 40); err != nil {
			t.Fatal(err)
		}
		if err := env.c.Stdin(ctx, pid, strings.NewReader("\n"), false); err != nil {
			t.Fatal(err)
		}
		recvUntil(t, s, res, "40 100")
		rest := collect(t, s)
		if rest.end.ExitCode != 0 {
			t.Fatalf("exit %d", rest.end.ExitCode)
		}
	})
	t.Run("resize without pty", func(t *testing.T) {
		s, pid := env.startPID(t, agentapi.StartRequest{Args: []string{"sleep", "100"}})
		defer s.Close()
		if err := env.c.Resize(ctx, pid, 10, 10); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Fatalf("Resize: %v; want failed_precondition", err)
		}
		if err := env.c.Signal(ctx, pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("eof on close-stdin", func(t *testing.T) {
		s, pid := env.startPID(t, agentapi.StartRequest{Args: []string{"cat"}, PTY: &agentapi.PTYSize{Cols: 80, Rows: 24}})
		if err := env.c.Stdin(ctx, pid, strings.NewReader("typed\n"), true); err != nil {
			t.Fatal(err)
		}
		res := collect(t, s)
		if !strings.Contains(res.pty.String(), "typed") || res.end.ExitCode != 0 {
			t.Fatalf("pty %q exit %d", res.pty.String(), res.end.ExitCode)
		}
	})
}

func TestProcessSignalGroup(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	s, pid := env.startPID(t, agentapi.StartRequest{Args: []string{"sh", "-c", "sleep 100 & sleep 100"}})
	waitFor(t, "sh and two sleeps", func() bool { return len(groupMembers(pid)) == 3 })
	members := groupMembers(pid)
	if err := env.c.Signal(ctx, pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := collect(t, s)
	if res.end.ExitCode != 137 || res.end.Signal != "SIGKILL" {
		t.Fatalf("end = %+v; want 137 SIGKILL", res.end)
	}
	waitFor(t, "the whole group to die", func() bool {
		for _, m := range members {
			if alive(m) {
				return false
			}
		}
		return true
	})
	if err := env.c.Signal(ctx, pid, syscall.SIGTERM); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Signal after exit: %v; want not_found", err)
	}
	if err := env.c.Signal(ctx, pid, syscall.Signal(0)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Signal 0: %v; want invalid_argument", err)
	}
}

func TestProcessBackgroundChildDoesNotHoldEnd(t *testing.T) {
	env := newEnv(t, "")
	tests := []struct {
		name string
		req  agentapi.StartRequest
	}{
		{"pipes", agentapi.StartRequest{Args: []string{"sh", "-c", "sleep 100 & echo started"}}},
		{"pty", agentapi.StartRequest{Args: []string{"sh", "-c", "sleep 100 & echo started"},
			PTY: &agentapi.PTYSize{Cols: 80, Rows: 24}}},
		{"background writer", agentapi.StartRequest{Args: []string{"sh", "-c", "yes & echo started"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res := env.run(t, tt.req)
			out := res.stdout.String() + res.pty.String()
			if !strings.Contains(out, "started") || res.end.ExitCode != 0 {
				t.Fatalf("output %.60q end %+v", out, res.end)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Fatalf("end took %v: the background child held it", d)
			}
			env.srv.KillAll()
		})
	}
}

func TestDrainAfterExitWithSlowReader(t *testing.T) {
	// The process has exited and its pipe still has much to give, while
	// the only reader stalls for longer than the drain grace: nothing may
	// be lost, the grace counts idle pipe time, not time spent waiting for
	// the reader.
	const size = 1 << 20
	p := &process{
		out:    newHub(),
		log:    slog.New(slog.DiscardHandler),
		exited: make(chan struct{}),
		done:   make(chan struct{}),
	}
	close(p.exited)
	sub, _, err := p.out.subscribe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = w.Write(make([]byte, size))
		w.Close()
	}()
	go p.supervise([]*os.File{r}, []string{agentapi.EventStdout}, func(*process) {})
	time.Sleep(3 * drainGrace) // the reader stalls past the grace: time itself must pass
	n := 0
	for ev := range sub.ch {
		n += len(ev.Data)
	}
	<-p.done
	if n != size {
		t.Fatalf("received %d bytes; want %d", n, size)
	}
}

func TestProcessListConnect(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	s, pid := env.startPID(t, agentapi.StartRequest{
		Args: []string{"sh", "-c", "echo one; read x; echo detached; read y; echo two"}, Stdin: true, Tag: "bg",
	})
	res := &result{}
	recvUntil(t, s, res, "one")
	s.Close()
	p, err := env.srv.procs.getRunning(pid)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream to detach", func() bool {
		p.out.mu.Lock()
		defer p.out.mu.Unlock()
		return len(p.out.subs) == 0
	})

	list, err := env.c.List(ctx)
	if err != nil || len(list) != 1 || list[0].PID != pid || list[0].Tag != "bg" || list[0].Args[0] != "sh" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if _, err := env.c.Start(ctx, asSelf(agentapi.StartRequest{Args: []string{"true"}, Tag: "bg"})); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("Start with a used tag: %v; want already_exists", err)
	}
	// Output while nobody is attached goes to the backlog...
	if err := env.c.Stdin(ctx, pid, strings.NewReader("x\n"), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "backlog", func() bool {
		p.out.mu.Lock()
		defer p.out.mu.Unlock()
		return len(p.out.backlog) > 0
	})
	// ...and is replayed to the next subscriber, by tag.
	s2, err := env.c.Connect(ctx, 0, "bg")
	if err != nil {
		t.Fatal(err)
	}
	res2 := &result{}
	ev, err := s2.Recv()
	if err != nil || ev.Type != agentapi.EventStart || ev.PID != pid {
		t.Fatalf("first event after connect = %+v, %v", ev, err)
	}
	recvUntil(t, s2, res2, "detached")
	if err := env.c.Stdin(ctx, pid, strings.NewReader("y\n"), true); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, s2)
	if rest.stdout.String() != "two\n" || rest.end.ExitCode != 0 {
		t.Fatalf("after reconnect: %q %+v", rest.stdout.String(), rest.end)
	}

	// After the end: start then end, by pid.
	s3, err := env.c.Connect(ctx, pid, "")
	if err != nil {
		t.Fatal(err)
	}
	if res3 := collect(t, s3); res3.pid != pid || res3.end.Type != agentapi.EventEnd {
		t.Fatalf("connect after end: %+v", res3)
	}
	if list, _ := env.c.List(ctx); len(list) != 0 {
		t.Fatalf("List after end = %+v", list)
	}
}

func TestProcessOutlivesStream(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	s, pid := env.startPID(t, agentapi.StartRequest{Args: []string{"sleep", "100"}})
	p, err := env.srv.procs.getRunning(pid)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	c2 := env.dial(t)
	defer c2.Close()
	env.c.Close()
	// The stream's handler detaches last, after anything it does on the
	// way out.
	waitFor(t, "the stream to detach", func() bool {
		p.out.mu.Lock()
		defer p.out.mu.Unlock()
		return len(p.out.subs) == 0
	})
	if !alive(pid) {
		t.Fatal("closing the stream and the connection killed the process")
	}
	if err := c2.Signal(ctx, pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownPID(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	const pid = 1 << 30
	calls := map[string]func() error{
		"signal":      func() error { return env.c.Signal(ctx, pid, syscall.SIGTERM) },
		"stdin":       func() error { return env.c.Stdin(ctx, pid, strings.NewReader("x"), false) },
		"close-stdin": func() error { return env.c.CloseStdin(ctx, pid) },
		"resize":      func() error { return env.c.Resize(ctx, pid, 80, 24) },
		"connect": func() error {
			_, err := env.c.Connect(ctx, pid, "")
			return err
		},
		"connect tag": func() error {
			_, err := env.c.Connect(ctx, 0, "no-such-tag")
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, errdefs.ErrNotFound) {
				t.Fatalf("%s: %v; want not_found", name, err)
			}
		})
	}
}

func TestProcessLogToConsole(t *testing.T) {
	var console bytes.Buffer
	env := newEnv(t, "")
	env.srv.console = &lockedWriter{w: &console}
	res := env.run(t, agentapi.StartRequest{Args: []string{"sh", "-c", "echo to-console"}, Log: true})
	if res.stdout.String() != "to-console\n" {
		t.Fatalf("stream got %q", res.stdout.String())
	}
	env.srv.console.(*lockedWriter).mu.Lock()
	defer env.srv.console.(*lockedWriter).mu.Unlock()
	if console.String() != "to-console\n" {
		t.Fatalf("console got %q", console.String())
	}
}

func TestManyConcurrentCalls(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			s, err := env.c.Start(ctx, asSelf(agentapi.StartRequest{Args: []string{"sh", "-c", "echo $0", string(rune('a' + i%26))}}))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			var out strings.Builder
			for {
				ev, err := s.Recv()
				if err != nil {
					errs <- err
					return
				}
				out.Write(ev.Data)
				if ev.Type == agentapi.EventEnd {
					if ev.ExitCode != 0 || out.String() != string(rune('a'+i%26))+"\n" {
						errs <- errors.New("wrong output " + out.String())
					}
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			if err := env.c.Health(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestStalledReaderDoesNotBlockOthers(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	// Never read this stream: its flow-control window and the process's
	// pipe fill up, and the process blocks. Nothing else may.
	stalled, pid := env.startPID(t, agentapi.StartRequest{Args: []string{"cat", "/dev/zero"}})
	defer stalled.Close()
	waitFor(t, "cat to block on its full pipe", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
		return strings.Contains(string(b), "pipe_write")
	})
	for i := range 5 {
		res := env.run(t, agentapi.StartRequest{Args: []string{"echo", "free"}})
		if res.stdout.String() != "free\n" {
			t.Fatalf("call %d: %q", i, res.stdout.String())
		}
		if _, err := env.c.List(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.c.Signal(ctx, pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

func TestOrphansReaped(t *testing.T) {
	env := newEnv(t, "")
	// The background sleep outlives its parent, is adopted by the agent (a
	// child subreaper here, PID 1 in a sandbox), and must not stay a zombie.
	res := env.run(t, agentapi.StartRequest{Args: []string{"sh", "-c", "sleep 0.2 & echo $!"}})
	orphan, err := strconv.Atoi(strings.TrimSpace(res.stdout.String()))
	if err != nil {
		t.Fatalf("no pid in %q", res.stdout.String())
	}
	waitFor(t, "the orphan to be reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(orphan))
		return errors.Is(err, os.ErrNotExist)
	})
}
