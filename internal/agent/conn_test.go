package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/agentapi/wiretest"
	"corral/internal/errdefs"
)

// rawClient speaks HTTP/2 to the agent without agentapi, to send what the
// real client never would.
func rawClient(t *testing.T, env *testEnv) *http.ClientConn {
	t.Helper()
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Protocols: &h2c,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", env.sock)
		},
	}
	cc, err := tr.NewClientConn(t.Context(), "http", "agent:80")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func TestHostileRequests(t *testing.T) {
	env := newEnv(t, t.TempDir())
	cc := rawClient(t, env)
	big := `{"pid": 1}` + strings.Repeat(" ", 2<<20)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"oversize json body", "POST", "/v1/process/signal", big, 400, "invalid_argument"},
		{"oversize start", "POST", "/v1/process/start", `{"args":["` + strings.Repeat("a", 2<<20) + `"]}`, 400, "invalid_argument"},
		{"garbage json", "POST", "/v1/process/signal", "{{{", 400, "invalid_argument"},
		{"wrong json type", "POST", "/v1/process/start", `{"args": "sh"}`, 400, "invalid_argument"},
		{"empty body", "POST", "/v1/fs/mkdir", "", 400, "invalid_argument"},
		{"unknown path", "GET", "/v1/nope", "", 404, "not_found"},
		{"unknown version", "GET", "/v9/health", "", 404, "not_found"},
		{"bad pid", "POST", "/v1/process/stdin?pid=abc", "x", 400, "invalid_argument"},
		{"bad mode", "PUT", "/v1/files?path=/x&mode=999", "x", 400, "invalid_argument"},
		{"bad depth", "GET", "/v1/fs/list?path=/&depth=-1", "", 400, "invalid_argument"},
		{"connect without pid or tag", "POST", "/v1/process/connect", `{}`, 400, "invalid_argument"},
		{"version", "GET", "/version", "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testCtx(t), tt.method, "http://agent"+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d (%s); want %d", resp.StatusCode, body, tt.status)
			}
			if tt.code == "" {
				return
			}
			var w errdefs.Wire
			if err := json.Unmarshal(body, &w); err != nil || w.Error.Code != tt.code {
				t.Fatalf("body %s; want code %s", body, tt.code)
			}
		})
	}
	t.Run("version body is frozen", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "http://agent/version", nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		if _, ok := v["protocols"].([]any); !ok || v["agent"] != agentapi.AgentVersion || len(v) != 2 {
			t.Fatalf("GET /version = %v", v)
		}
	})
}

func TestHeaderListBound(t *testing.T) {
	env := newEnv(t, t.TempDir())
	cc := rawClient(t, env)
	req, _ := http.NewRequest("GET", "http://agent/v1/health", nil)
	req.Header.Set("X-Big", strings.Repeat("h", 200<<10))
	resp, err := cc.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("a 200 KiB header list was accepted: %s", resp.Status)
		}
	}
	// The connection is still usable for normal requests.
	if err := env.c.Health(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestClientClose(t *testing.T) {
	env := newEnv(t, "")
	c := env.dial(t)
	if c.Version() != agentapi.ProtocolVersion || c.AgentVersion() != agentapi.AgentVersion {
		t.Fatalf("version %d %q", c.Version(), c.AgentVersion())
	}
	s, pid := env.startPID(t, agentapi.StartRequest{Args: []string{"sleep", "100"}})
	defer s.Close()
	stream, err := c.Connect(testCtx(t), pid, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after Close")
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("Recv on a closed client succeeded")
	}
	if err := c.Health(testCtx(t)); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Health after Close: %v; want unavailable", err)
	}
}

func TestGoroutinesEnd(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("session", func(t *testing.T) {
		env := newEnv(t, t.TempDir())
		during := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// A stalled stream, a stdin call blocked on a process that never
		// reads, finished calls, and then the connection drops.
		stalled, _ := env.startPID(t, agentapi.StartRequest{Args: []string{"cat", "/dev/zero"}})
		defer stalled.Close()
		_, sleeper := env.startPID(t, agentapi.StartRequest{Args: []string{"sleep", "100"}, Stdin: true})
		stdinDone := make(chan error, 1)
		go func() {
			stdinDone <- env.c.Stdin(ctx, sleeper, io.LimitReader(zeros{}, 64<<20), false)
		}()
		for range 10 {
			env.run(t, agentapi.StartRequest{Args: []string{"true"}})
			if _, err := env.c.WriteFile(testCtx(t), "/f", strings.NewReader("x"), 0, ""); err != nil {
				t.Fatal(err)
			}
		}
		env.c.Close()
		if err := <-stdinDone; err == nil {
			t.Fatal("stdin call survived the connection")
		}
		env.srv.KillAll()
		waitFor(t, "processes to end", func() bool { return retired(env.srv) })
		waitForGoroutines(t, during)
	})
	waitForGoroutines(t, before)
}

// waitForGoroutines waits until at most n goroutines run, and dumps them
// when they do not.
func waitForGoroutines(t *testing.T, n int) {
	t.Helper()
	waited := false
	defer func() {
		if !waited { // waitFor failed the test
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Logf("%d goroutines still running:\n%s", runtime.NumGoroutine(), buf.String())
		}
	}()
	waitFor(t, fmt.Sprintf("at most %d goroutines", n), func() bool { return runtime.NumGoroutine() <= n })
	waited = true
}

// signalsPending reports whether any of sigs was sent to this process and
// not yet delivered to one of its threads (ShdPnd in /proc/self/status).
func signalsPending(t *testing.T, sigs []unix.Signal) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "ShdPnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("ShdPnd in /proc/self/status: %v", err)
			}
			for _, sig := range sigs {
				if mask&(1<<(sig-1)) != 0 {
					return true
				}
			}
			return false
		}
	}
	t.Fatal("no ShdPnd in /proc/self/status")
	return false
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestListenUnix(t *testing.T) {
	dir, err := os.MkdirTemp("", "ag")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	file := filepath.Join(dir, "file")
	mustWrite(t, file, "keep")
	tests := []struct {
		name, addr string
		ok         bool
	}{
		{"stale socket replaced", "unix:" + sock, true},
		{"not a socket", "unix:" + file, false},
		{"no scheme", sock, false},
		{"empty path", "unix:", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := listenUnix(tt.addr)
			if (err == nil) != tt.ok {
				t.Fatalf("listenUnix(%q) = %v; want ok=%v", tt.addr, err, tt.ok)
			}
			if l != nil {
				l.Close()
			}
		})
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep" {
		t.Fatalf("a regular file was touched: %q %v", b, err)
	}
}

func TestMainFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no listen", nil, 2},
		{"unknown flag", []string{"--bogus"}, 2},
		{"extra argument", []string{"--listen", "unix:/x", "extra"}, 2},
		{"bad address", []string{"--listen", "tcp:1.2.3.4:5"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code := Main(context.Background(), tt.args); code != tt.code {
				t.Fatalf("Main(%q) = %d; want %d", tt.args, code, tt.code)
			}
		})
	}
}

func TestMainServes(t *testing.T) {
	skipInFuzzCoordinator(t)
	dir, err := os.MkdirTemp("", "ag")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- Main(ctx, []string{"--listen", "unix:" + sock, "--root", dir}) }()
	waitFor(t, "the socket", func() bool { _, err := os.Stat(sock); return err == nil })
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentapi.NewClient(testCtx(t), conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Health(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// Stray signals, which would end a Go program, are absorbed.
	stray := []unix.Signal{unix.SIGHUP, unix.SIGUSR1, unix.SIGPIPE, unix.SIGALRM}
	for _, sig := range stray {
		if err := unix.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the stray signals to be delivered", func() bool { return !signalsPending(t, stray) })
	if err := c.Health(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// SIGTERM kills what the agent started, and Main returns 0.
	stream, err := c.Start(testCtx(t), asSelf(agentapi.StartRequest{Args: []string{"sleep", "100"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	ev, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(os.Getpid(), unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 {
		t.Fatalf("Main returned %d", code)
	}
	waitFor(t, "the process to be killed", func() bool { return !alive(ev.PID) })
	cancel()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("client did not notice the agent stopping")
	}
}

// TestTransportSettings: the agent advertises the bounds of
// docs/AGENT_PROTOCOL.md ("Transport") in its first frames.
func TestTransportSettings(t *testing.T) {
	env := newEnv(t, t.TempDir())
	conn, err := net.Dial("unix", env.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	got, connWindow := wiretest.FirstFrames(t, fr)
	want := map[http2.SettingID]uint32{
		http2.SettingMaxFrameSize:         maxFrameSize,
		http2.SettingMaxConcurrentStreams: maxConcurrentStreams,
		http2.SettingInitialWindowSize:    streamRecvWindow,
	}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("%v = %d; want %d", id, got[id], v)
		}
	}
	if connWindow < connRecvWindow { // the sum of the streams' windows
		t.Errorf("connection window %d; want at least %d", connWindow, connRecvWindow)
	}
}
