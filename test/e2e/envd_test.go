package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"corral/internal/e2b/envd/gen/filesystem/filesystemconnect"
	"corral/internal/e2b/envd/gen/process"
	"corral/internal/e2b/envd/gen/process/processconnect"
)

// envdClient speaks to one sandbox's envd face as an E2B client does: the
// routing headers and the access token on every request.
type envdClient struct {
	base, id, token string
	http            *http.Client
	proc            processconnect.ProcessClient
	fs              filesystemconnect.FilesystemClient
}

// headerTransport adds the E2B headers to every request.
type headerTransport struct {
	id, token string
	extra     http.Header
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", h.id)
	r.Header.Set("E2b-Sandbox-Port", "49983")
	if h.token != "" {
		r.Header.Set("X-Access-Token", h.token)
	}
	for k, v := range h.extra {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// newEnvd is a client of sandbox id's envd face with its access token
// (token "" for none); json picks Connect's JSON codec (the e2b SDK's).
func newEnvd(t *testing.T, d *daemon, id, token string, json bool) *envdClient {
	t.Helper()
	base := "http://" + d.flag("--envd-listen")
	hc := &http.Client{Transport: &headerTransport{id: id, token: token}}
	var opts []connect.ClientOption
	if json {
		opts = append(opts, connect.WithProtoJSON())
	}
	return &envdClient{base: base, id: id, token: token, http: hc,
		proc: processconnect.NewProcessClient(hc, base, opts...), fs: filesystemconnect.NewFilesystemClient(hc, base, opts...)}
}

// accessToken is sandbox id's envd access token, from the native API.
func accessToken(t *testing.T, d *daemon, id string) string {
	t.Helper()
	sb, err := d.client.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if sb.EnvdAccessToken == "" {
		t.Fatalf("sandbox %s has no envd_access_token", id)
	}
	return sb.EnvdAccessToken
}

// procResult is what a process stream said.
type procResult struct {
	pid                 uint32
	stdout, stderr, pty bytes.Buffer
	end                 *process.ProcessEvent_EndEvent
	keepalives          int
	err                 error
}

// collect reads a Start or Connect stream to its end; onStart runs once
// the start event came (with the pid).
func collect[T any, PT interface {
	*T
	GetEvent() *process.ProcessEvent
}](s *connect.ServerStreamForClient[T], onStart func(pid uint32)) *procResult {
	r := &procResult{}
	for s.Receive() {
		ev := PT(s.Msg()).GetEvent()
		switch {
		case ev.GetStart() != nil:
			r.pid = ev.GetStart().GetPid()
			if onStart != nil {
				onStart(r.pid)
			}
		case ev.GetData() != nil:
			d := ev.GetData()
			r.stdout.Write(d.GetStdout())
			r.stderr.Write(d.GetStderr())
			r.pty.Write(d.GetPty())
		case ev.GetEnd() != nil:
			r.end = ev.GetEnd()
		case ev.GetKeepalive() != nil:
			r.keepalives++
		}
	}
	r.err = s.Err()
	return r
}

func start(cmd string, args ...string) *process.StartRequest {
	return &process.StartRequest{Process: &process.ProcessConfig{Cmd: cmd, Args: args}}
}

func TestEnvdProcess(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			if rt == "vm" && testing.Short() {
				t.Skip("vm in -short")
			}
			testEnvdProcess(t, d, rt)
		})
	}
}

func testEnvdProcess(t *testing.T, d *daemon, rt string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := d.create("--runtime", rt, "--timeout", "10m")
	token := accessToken(t, d, id)
	for _, json := range []bool{true, false} {
		c := newEnvd(t, d, id, token, json)
		// Output, exit code, env and cwd.
		req := start("/bin/sh", "-c", `echo out $FOO; pwd; echo err >&2; exit 3`)
		cwd := "/tmp"
		req.Process.Envs, req.Process.Cwd = map[string]string{"FOO": "bar"}, &cwd
		stream, err := c.proc.Start(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		r := collect[process.StartResponse](stream, nil)
		if r.err != nil || r.pid == 0 || r.stdout.String() != "out bar\n/tmp\n" || r.stderr.String() != "err\n" ||
			r.end == nil || r.end.GetExitCode() != 3 || !r.end.GetExited() || r.end.GetStatus() != "exit status 3" {
			t.Fatalf("json=%v: pid %d stdout %q stderr %q end %v err %v", json, r.pid, r.stdout.String(), r.stderr.String(), r.end, r.err)
		}
	}
	c := newEnvd(t, d, id, token, true)

	// Stdin: SendInput, then CloseStdin ends cat.
	yes := true
	req := start("/bin/cat")
	req.Stdin = &yes
	stream, err := c.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	r := collect[process.StartResponse](stream, func(pid uint32) {
		sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
		in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("hello\n")}}
		if _, err := c.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: in})); err != nil {
			t.Error(err)
		}
		if _, err := c.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
			t.Error(err)
		}
	})
	if r.stdout.String() != "hello\n" || r.end == nil || r.end.GetExitCode() != 0 {
		t.Fatalf("cat: stdout %q end %v err %v", r.stdout.String(), r.end, r.err)
	}

	// StreamInput (a client stream, over HTTP/1.1) feeds a cat too.
	stream, err = c.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	r = collect[process.StartResponse](stream, func(pid uint32) {
		sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
		in := c.proc.StreamInput(ctx)
		msgs := []*process.StreamInputRequest{
			{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: sel}}},
			{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("one ")}}}}},
			{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("two\n")}}}}},
		}
		for _, m := range msgs {
			if err := in.Send(m); err != nil {
				t.Error(err)
			}
		}
		if _, err := in.CloseAndReceive(); err != nil {
			t.Error(err)
		}
		if _, err := c.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
			t.Error(err)
		}
	})
	if r.stdout.String() != "one two\n" || r.end == nil || r.end.GetExitCode() != 0 {
		t.Fatalf("cat by StreamInput: stdout %q end %v err %v", r.stdout.String(), r.end, r.err)
	}

	testEnvdPTY(ctx, t, c)
	testEnvdListSignal(ctx, t, c)

	// Keepalives at the interval the client asks for.
	kreq := connect.NewRequest(start("/bin/sleep", "2.5"))
	kreq.Header().Set("Keepalive-Ping-Interval", "1")
	stream, err = c.proc.Start(ctx, kreq)
	if err != nil {
		t.Fatal(err)
	}
	if r := collect[process.StartResponse](stream, nil); r.keepalives < 1 || r.end == nil {
		t.Errorf("sleep 2.5 with keepalives every 1s: %d keepalives, end %v, err %v", r.keepalives, r.end, r.err)
	}

	// Killing the sandbox cuts an open stream at once, and /health says 502.
	stream, err = c.proc.Start(ctx, connect.NewRequest(start("/bin/sleep", "600")))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *procResult, 1)
	go func() { done <- collect[process.StartResponse](stream, nil) }()
	time.Sleep(500 * time.Millisecond)
	t0 := time.Now()
	if _, err := d.client.Terminate(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		// The connection is cut, as envd's is when its VM goes: an error,
		// never a clean end.
		if r.err == nil || r.end != nil {
			t.Errorf("a stream of a killed sandbox ended with %v (end %v), want the connection cut", r.err, r.end)
		}
		t.Logf("the stream ended %s after the terminate call", time.Since(t0))
	case <-time.After(30 * time.Second):
		t.Fatal("the stream outlived its sandbox by 30s")
	}
	resp, err := c.http.Get(c.base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("/health of a terminated sandbox: %d, want 502", resp.StatusCode)
	}
}

// testEnvdPTY: a terminal of the size asked for, resized by Update, fed
// through pty input.
func testEnvdPTY(ctx context.Context, t *testing.T, c *envdClient) {
	req := start("/bin/sh", "-c", `stty size; read x; stty size; echo "got $x"`)
	req.Pty = &process.PTY{Size: &process.PTY_Size{Cols: 100, Rows: 30}}
	stream, err := c.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	var pid uint32
	var out bytes.Buffer
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if ev.GetStart() != nil {
			pid = ev.GetStart().GetPid()
		}
		out.Write(ev.GetData().GetPty())
		if strings.Contains(out.String(), "30 100") && pid != 0 {
			sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
			if _, err := c.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel,
				Pty: &process.PTY{Size: &process.PTY_Size{Cols: 120, Rows: 40}}})); err != nil {
				t.Fatal(err)
			}
			in := &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("go\n")}}
			if _, err := c.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: in})); err != nil {
				t.Fatal(err)
			}
			pid = 0
		}
		if end := ev.GetEnd(); end != nil && end.GetExitCode() != 0 {
			t.Errorf("pty shell: %v", end)
		}
	}
	if s := out.String(); !strings.Contains(s, "40 120") || !strings.Contains(s, "got go") {
		t.Errorf("pty output %q: want the resized size and the input", s)
	}
}

// testEnvdListSignal: a tagged process is listed, reached by tag, and
// SIGKILL by pid ends it for its Connect stream.
func testEnvdListSignal(ctx context.Context, t *testing.T, c *envdClient) {
	tag := "sleeper"
	req := start("/bin/sleep", "300")
	req.Tag = &tag
	bg, err := c.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	var pid uint32
	for pid == 0 && bg.Receive() {
		pid = bg.Msg().GetEvent().GetStart().GetPid()
	}
	bg.Close() // the process stays: a stream's end is not a kill
	list, err := c.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == pid && p.GetTag() == tag && p.GetConfig().GetCmd() == "/bin/sleep" {
			found = true
		}
	}
	if !found {
		t.Fatalf("pid %d tag %q not in %v", pid, tag, list.Msg.GetProcesses())
	}
	// Two streams on it, one by tag and one by pid, both see its end.
	done := make(chan *procResult, 2)
	for _, sel := range []*process.ProcessSelector{{Selector: &process.ProcessSelector_Tag{Tag: tag}}, {Selector: &process.ProcessSelector_Pid{Pid: pid}}} {
		conn, err := c.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: sel}))
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- collect[process.ConnectResponse](conn, nil) }()
	}
	time.Sleep(500 * time.Millisecond)
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	if _, err := c.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case r := <-done:
			if r.end == nil || r.end.GetExited() || !strings.HasPrefix(r.end.GetStatus(), "signal: ") {
				t.Errorf("connected to a killed process: end %v err %v", r.end, r.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no end event after SIGKILL")
		}
	}
	// An unknown tag and a bad signal are envd's errors.
	_, err = c.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("SIGNAL_UNSPECIFIED: %v", err)
	}
	nc, err := c.proc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "no-such-tag"}}}))
	if err == nil {
		err = collect[process.ConnectResponse](nc, nil).err
	}
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("an unknown tag: %v", err)
	}
	st, err := c.proc.Start(ctx, connect.NewRequest(start("")))
	if err == nil {
		err = collect[process.StartResponse](st, nil).err
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("an empty cmd: %v", err)
	}
}
