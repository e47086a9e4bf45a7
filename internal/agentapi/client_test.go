package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"corral/internal/agentapi/wiretest"
	"corral/internal/errdefs"
)

// fakeAgent serves handler over HTTP/2 on a unix socket and returns a
// connection to it; stop drops the server side.
func fakeAgent(t *testing.T, handler http.Handler) (conn net.Conn, stop func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", "aa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: handler, Protocols: &h2c, ConnState: func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted <- c
		}
	}}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	conn, err = net.Dial("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	t.Cleanup(func() { server.Close() })
	return conn, func() { server.Close() }
}

// agentMux answers /version with protocols and adds the given routes.
func agentMux(protocols []int, routes map[string]http.HandlerFunc) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(VersionInfo{Protocols: protocols, Agent: "fake"})
	})
	for pattern, h := range routes {
		mux.HandleFunc(pattern, h)
	}
	return mux
}

func newFakeClient(t *testing.T, routes map[string]http.HandlerFunc) (*Client, func()) {
	t.Helper()
	conn, stop := fakeAgent(t, agentMux([]int{1, 7}, routes))
	c, err := NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, stop
}

func TestNegotiation(t *testing.T) {
	tests := []struct {
		name      string
		protocols []int
		want      int
		kind      error
	}{
		{"common version", []int{1}, 1, nil},
		{"highest common", []int{0, 1, 2, 3, 4, 5, 9}, 5, nil},
		{"a protocol 4 agent", []int{1, 2, 3, 4}, 4, nil},
		{"a protocol 2 agent", []int{1, 2}, 2, nil},
		{"an older agent", []int{1, 9}, 1, nil},
		{"none in common", []int{6, 7}, 0, errdefs.ErrNotSupported},
		{"empty", nil, 0, errdefs.ErrNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, _ := fakeAgent(t, agentMux(tt.protocols, nil))
			c, err := NewClient(context.Background(), conn)
			if tt.kind != nil {
				if !errors.Is(err, tt.kind) {
					t.Fatalf("NewClient: %v; want %v", err, tt.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Version() != tt.want || c.AgentVersion() != "fake" {
				t.Fatalf("version %d %q", c.Version(), c.AgentVersion())
			}
		})
	}
}

func TestNegotiationAgentGone(t *testing.T) {
	conn, stop := fakeAgent(t, http.NotFoundHandler())
	stop()
	if _, err := NewClient(context.Background(), conn); !errors.Is(err, errdefs.ErrUnavailable) &&
		!errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("NewClient against a dead agent: %v", err)
	}
}

func TestErrorDecoding(t *testing.T) {
	wire := func(status int, kind error) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(errdefs.ToWire(fmt.Errorf("%w: detail", kind)))
		}
	}
	plain := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "plain text", status) }
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		kind    error
	}{
		{"not found", wire(404, errdefs.ErrNotFound), errdefs.ErrNotFound},
		{"invalid", wire(400, errdefs.ErrInvalidArgument), errdefs.ErrInvalidArgument},
		{"exists", wire(409, errdefs.ErrAlreadyExists), errdefs.ErrAlreadyExists},
		{"precondition", wire(409, errdefs.ErrFailedPrecondition), errdefs.ErrFailedPrecondition},
		{"permission", wire(403, errdefs.ErrPermissionDenied), errdefs.ErrPermissionDenied},
		{"exhausted", wire(429, errdefs.ErrResourceExhausted), errdefs.ErrResourceExhausted},
		{"non-json 404", plain(404), errdefs.ErrNotFound},
		{"non-json 405", plain(405), errdefs.ErrNotSupported},
		{"non-json 400", plain(400), errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newFakeClient(t, map[string]http.HandlerFunc{"/v1/": tt.handler})
			ctx := context.Background()
			checks := map[string]error{
				"signal": c.Signal(ctx, 1, syscall.SIGTERM),
				"stat":   func() error { _, err := c.Stat(ctx, "/x", ""); return err }(),
				"start":  func() error { _, err := c.Start(ctx, StartRequest{Args: []string{"x"}}); return err }(),
				"read":   func() error { _, _, err := c.ReadFile(ctx, "/x", ""); return err }(),
			}
			for call, err := range checks {
				if !errors.Is(err, tt.kind) {
					t.Errorf("%s: %v; want %v", call, err, tt.kind)
				}
			}
		})
	}
}

func TestStreamRecv(t *testing.T) {
	lines := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", ContentTypeNDJSON)
			_, _ = io.WriteString(w, body)
		}
	}
	full := `{"type":"start","pid":5}` + "\n" + `{"type":"keepalive"}` + "\n" +
		`{"type":"stdout","data":"aGk="}` + "\n" + `{"type":"keepalive"}` + "\n" +
		`{"type":"end","exit_code":3}` + "\n"
	tests := []struct {
		name    string
		body    string
		types   []string
		lastErr func(error) bool
	}{
		{"full stream, keepalives swallowed", full, []string{"start", "stdout", "end"},
			func(err error) bool { return errors.Is(err, io.EOF) }},
		{"cut before end", `{"type":"start","pid":5}` + "\n", []string{"start"},
			func(err error) bool { return errors.Is(err, errdefs.ErrUnavailable) }},
		{"malformed line", `{"type":"start","pid":5}` + "\n{nope\n", []string{"start"},
			func(err error) bool { return err != nil && !errors.Is(err, io.EOF) }},
		{"oversize line", `{"type":"stdout","data":"` + strings.Repeat("A", MaxEventLine) + `"}` + "\n", nil,
			func(err error) bool { return err != nil && !errors.Is(err, io.EOF) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newFakeClient(t, map[string]http.HandlerFunc{"POST /v1/process/start": lines(tt.body)})
			s, err := c.Start(context.Background(), StartRequest{Args: []string{"x"}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var types []string
			for {
				ev, err := s.Recv()
				if err != nil {
					if !tt.lastErr(err) {
						t.Fatalf("final error %v", err)
					}
					break
				}
				types = append(types, ev.Type)
				if ev.Type == EventStdout && string(ev.Data) != "hi" {
					t.Fatalf("data %q", ev.Data)
				}
				if ev.Type == EventEnd && ev.ExitCode != 3 {
					t.Fatalf("exit code %d", ev.ExitCode)
				}
			}
			if strings.Join(types, ",") != strings.Join(tt.types, ",") {
				t.Fatalf("events %v; want %v", types, tt.types)
			}
			if _, err := s.Recv(); err == nil {
				t.Fatal("Recv after the end succeeded")
			}
		})
	}
}

func TestDoneOnConnectionLoss(t *testing.T) {
	c, stop := newFakeClient(t, nil)
	select {
	case <-c.Done():
		t.Fatal("Done closed on a live connection")
	default:
	}
	stop()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the agent went away")
	}
	if err := c.Health(context.Background()); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Health: %v; want unavailable", err)
	}
}

func TestCallerCancellationIsNotUnavailable(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	c, _ := newFakeClient(t, map[string]http.HandlerFunc{
		"GET /v1/health": func(http.ResponseWriter, *http.Request) { <-block },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Health(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Health: %v; want the caller's deadline", err)
	}
}

func TestWireShapes(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"start event", Event{Type: EventStart, PID: 12}, `{"type":"start","pid":12}`},
		{"output event", Event{Type: EventStdout, Data: []byte("hi")}, `{"type":"stdout","data":"aGk="}`},
		{"end event", Event{Type: EventEnd, ExitCode: 124, Signal: "SIGKILL", TimedOut: true},
			`{"type":"end","exit_code":124,"signal":"SIGKILL","timed_out":true}`},
		{"minimal start request", StartRequest{Args: []string{"true"}}, `{"args":["true"]}`},
		{"pty", StartRequest{Args: []string{"sh"}, PTY: &PTYSize{Cols: 80, Rows: 24}},
			`{"args":["sh"],"pty":{"cols":80,"rows":24}}`},
		{"version", VersionInfo{Protocols: []int{1}, Agent: "corral-agent 0.1.0"},
			`{"protocols":[1],"agent":"corral-agent 0.1.0"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.v)
			if err != nil || string(b) != tt.want {
				t.Fatalf("got %s, %v; want %s", b, err, tt.want)
			}
		})
	}
}

func TestModeConversion(t *testing.T) {
	tests := []struct {
		m os.FileMode
		u uint32
	}{
		{0o644, 0o644},
		{0o755 | os.ModeSetuid, 0o4755},
		{0o775 | os.ModeSetgid, 0o2775},
		{0o777 | os.ModeSticky, 0o1777},
	}
	for _, tt := range tests {
		t.Run(tt.m.String(), func(t *testing.T) {
			if got := UnixMode(tt.m); got != tt.u {
				t.Fatalf("UnixMode = %o; want %o", got, tt.u)
			}
			if got := FileMode(tt.u); got != tt.m {
				t.Fatalf("FileMode = %v; want %v", got, tt.m)
			}
		})
	}
}

// TestTransportSettings: the client advertises the bounds of
// docs/AGENT_PROTOCOL.md ("Transport") in its first frames.
func TestTransportSettings(t *testing.T) {
	client, agent := net.Pipe()
	defer agent.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := NewClient(ctx, client)
		done <- err
	}()
	_ = agent.SetDeadline(time.Now().Add(10 * time.Second))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(agent, preface); err != nil || string(preface) != http2.ClientPreface {
		t.Fatalf("preface %q, %v", preface, err)
	}
	fr := http2.NewFramer(io.Discard, agent)
	got, connWindow := wiretest.FirstFrames(t, fr)
	want := map[http2.SettingID]uint32{
		http2.SettingMaxFrameSize:      maxFrameSize,
		http2.SettingInitialWindowSize: streamRecvWindow,
		http2.SettingEnablePush:        0,
	}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("%v = %d; want %d", id, got[id], v)
		}
	}
	if n := got[http2.SettingMaxHeaderListSize]; n < maxHeaderBytes || n > maxHeaderBytes+1<<10 {
		t.Errorf("%v = %d; want about %d", http2.SettingMaxHeaderListSize, n, maxHeaderBytes)
	}
	if connWindow < connRecvWindow { // the sum of the streams' windows
		t.Errorf("connection window %d; want at least %d", connWindow, connRecvWindow)
	}
	agent.Close()
	if err := <-done; !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("NewClient on a dropped connection: %v; want unavailable", err)
	}
}

// A daemon refuses kill_tree to an agent older than protocol 3 (which
// would ignore the field and kill only the process group), before it
// sends anything.
func TestKillTreeNeedsProtocol3(t *testing.T) {
	started := false
	routes := map[string]http.HandlerFunc{"/v2" + PathStart: func(w http.ResponseWriter, r *http.Request) { started = true }}
	conn, _ := fakeAgent(t, agentMux([]int{1, 2}, routes))
	c, err := NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Start(context.Background(), StartRequest{Args: []string{"true"}, KillTree: true})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "kill_tree needs an agent of protocol 3") || started {
		t.Errorf("Start with KillTree on a protocol 2 agent: %v (sent: %v); want failed precondition naming protocol 3", err, started)
	}
}
