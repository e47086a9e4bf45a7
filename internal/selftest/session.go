package selftest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"corral/internal/selftest/probe"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// probePath is where the probe binary is uploaded in each sandbox.
const probePath = "/corral-selftest-probe"

// neighbourPort is where the neighbour sandbox listens (TCP and UDP).
const neighbourPort = 7777

// session is one runtime's run: its sandboxes and what the host set up for
// it.
type session struct {
	cfg      *Config
	c        *corral.Client
	rt       string
	w        *world
	logf     func(string, ...any)
	nonce    string     // in every marker of this run
	canary   string     // a secret in the attacker's env
	mu       sync.Mutex // guards ids and stops: the session's lanes run at once
	ids      []string
	snaps    []string
	stops    []func()
	a, b     *sbx // attacker, neighbour
	bSeen    *recorder
	hostSeen *recorder // connections to the host listener
	hostPort int
	procSys  *procSysResult // cached: two cases judge one probe run
}

// sbx is one sandbox of the session.
type sbx struct {
	id   string
	rec  *apiv1.Sandbox
	info probe.InfoResult
}

func (s *sbx) addr() string {
	if len(s.info.Addrs) > 0 {
		return s.info.Addrs[0]
	}
	return ""
}

func newSession(cfg *Config, rt string, w *world, logf func(string, ...any)) *session {
	return &session{cfg: cfg, c: cfg.Client, rt: rt, w: w, logf: logf, nonce: randomTag(6), canary: randomTag(20),
		bSeen: &recorder{}, hostSeen: &recorder{}}
}

// start starts the session's sandboxes; on failure the session's result
// is that setup, and it is cleaned up.
func (s *session) start(ctx context.Context) *Result {
	s.logf("%s: starting the attacker and neighbour sandboxes", s.rt)
	if err := s.setup(ctx); err != nil {
		s.cleanup()
		return &Result{Case: "setup", Status: Inconclusive, Tried: "start the attacker and neighbour sandboxes", Evidence: err.Error()}
	}
	return nil
}

// runCases runs the selected cases whose alone is as asked. The alone
// ones run in order; the others in two lanes at once, each in order: the
// cases with sandboxes of their own, and those that use the attacker.
func (s *session) runCases(ctx context.Context, alone bool) []Result {
	var shared, own []aCase
	for _, c := range cases {
		if c.alone != alone || !s.cfg.wanted(c.name) || (c.only != "" && c.only != s.rt) {
			continue
		}
		if c.own && !alone {
			own = append(own, c)
		} else {
			shared = append(shared, c)
		}
	}
	var ownResults []Result
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ownResults = s.runInOrder(ctx, own)
	}()
	out := s.runInOrder(ctx, shared)
	wg.Wait()
	return append(out, ownResults...)
}

// runInOrder runs cs one after the other.
func (s *session) runInOrder(ctx context.Context, cs []aCase) []Result {
	var out []Result
	for _, c := range cs {
		s.logf("%s: %s", s.rt, c.name)
		t0 := time.Now()
		r := c.run(ctx, s)
		r.Case = c.name
		s.logf("%s: %s: %s (%.1f s)", s.rt, c.name, r.Status, time.Since(t0).Seconds())
		out = append(out, r)
	}
	return out
}

// setup starts the host's markers and listener, the attacker (A: small
// disk, a secret in its env, an exposed port) and the neighbour (B,
// listening).
func (s *session) setup(ctx context.Context) error {
	if err := s.hostMarkers(); err != nil {
		return err
	}
	a, err := s.create(ctx, "attacker", apiv1.CreateSandboxRequest{DiskMB: 256,
		Env: map[string]string{"CORRAL_SELFTEST_CANARY": s.canary}, Expose: []apiv1.ExposedPort{{Port: 8080}}})
	if err != nil {
		return err
	}
	b, err := s.create(ctx, "neighbour", apiv1.CreateSandboxRequest{})
	if err != nil {
		return err
	}
	s.a, s.b = a, b
	return s.listenIn(ctx, b, s.bSeen)
}

// hostMarkers starts the host's marker process, writes its marker files
// and kernel log line, and opens the host listener.
func (s *session) hostMarkers() error {
	cmd := exec.Command("/bin/sleep", "3600")
	cmd.Args[0] = "corral-selftest-host-" + s.nonce
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the host marker process: %w", err)
	}
	s.onCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for _, dir := range []string{os.TempDir(), "/root"} {
		p := dir + "/corral-selftest-" + s.nonce + "-host"
		if err := os.WriteFile(p, []byte("host marker\n"), 0o600); err == nil {
			s.onCleanup(func() { _ = os.Remove(p) })
		}
	}
	if f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(f, "corral selftest marker corral-selftest-kmsg-%s\n", s.nonce)
		f.Close()
	}
	l, err := net.Listen("tcp4", ":0")
	if err != nil {
		return err
	}
	s.hostPort = l.Addr().(*net.TCPAddr).Port
	s.onCleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.hostSeen.add(probe.Seen{Label: "host", Proto: "tcp", From: c.RemoteAddr().String()})
			c.Close()
		}
	}()
	return nil
}

// create starts a sandbox of this session's runtime, uploads the probe,
// reads its addresses and routes its traffic to the world's internal
// addresses.
func (s *session) create(ctx context.Context, role string, req apiv1.CreateSandboxRequest) (*sbx, error) {
	req.Runtime = s.rt
	req.Timeout = 1800
	req.Tags = map[string]string{"selftest": s.nonce, "role": role}
	rec, err := s.c.Create(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("creating the %s sandbox: %w", role, err)
	}
	s.track(rec.ID)
	sb := &sbx{id: rec.ID, rec: rec}
	f, err := os.Open(s.cfg.ProbeBin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := s.c.WriteFile(ctx, rec.ID, probePath, f, 0o755, corral.AsUser("root")); err != nil {
		return nil, fmt.Errorf("uploading the probe to the %s sandbox: %w", role, err)
	}
	if err := s.probe(ctx, sb, "info", nil, &sb.info); err != nil {
		return nil, fmt.Errorf("the %s sandbox's info: %w", role, err)
	}
	if sb.addr() != "" {
		if err := s.w.routeFrom(sb.addr()); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// execReq is the request that runs probe name with args as root.
func execReq(name string, args any, timeout time.Duration) (apiv1.ExecRequest, error) {
	js, err := json.Marshal(args)
	if err != nil {
		return apiv1.ExecRequest{}, err
	}
	if args == nil {
		js = []byte("{}")
	}
	return apiv1.ExecRequest{Cmd: []string{probePath, probe.Cmd, name, string(js)}, User: "root", Timeout: timeout.Seconds()}, nil
}

// probe runs a probe in sb and decodes its result into out.
func (s *session) probe(ctx context.Context, sb *sbx, name string, args, out any) error {
	return s.probeFor(ctx, sb, name, args, out, 2*time.Minute)
}

func (s *session) probeFor(ctx context.Context, sb *sbx, name string, args, out any, timeout time.Duration) error {
	req, err := execReq(name, args, timeout)
	if err != nil {
		return err
	}
	var stdout, stderr capped
	stdout.max, stderr.max = 8<<20, 64<<10
	res, err := s.c.Run(ctx, sb.id, req, nil, &stdout, &stderr)
	if err != nil {
		return fmt.Errorf("probe %s: %w", name, err)
	}
	return decodeProbe(name, stdout.Bytes(), stderr.String(), res.ExitCode, out)
}

// decodeProbe reads the probe's Result from the last line of its output.
func decodeProbe(name string, stdout []byte, stderr string, code int, out any) error {
	lines := bytes.Split(bytes.TrimSpace(stdout), []byte("\n"))
	var r probe.Result
	if len(lines) == 0 || json.Unmarshal(lines[len(lines)-1], &r) != nil {
		return fmt.Errorf("probe %s: exit %d, no result (stderr: %s)", name, code, strings.TrimSpace(stderr))
	}
	if r.Error != "" {
		return fmt.Errorf("probe %s: %s", name, r.Error)
	}
	if out == nil || len(r.Result) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result, out)
}

// background starts probe name in sb and returns a function that waits
// for its result (decoded into out) and one that stops it.
func (s *session) background(ctx context.Context, sb *sbx, name string, args, out any) (wait func() error, stop func(), err error) {
	req, err := execReq(name, args, 10*time.Minute)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.c.Exec(ctx, sb.id, req)
	if err != nil {
		return nil, nil, fmt.Errorf("probe %s: %w", name, err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { st.Close() }) }
	s.onCleanup(stop)
	wait = func() error {
		var stdout, stderr capped
		stdout.max, stderr.max = 8<<20, 64<<10
		res, err := st.Copy(&stdout, &stderr)
		if err != nil {
			return fmt.Errorf("probe %s: %w", name, err)
		}
		return decodeProbe(name, stdout.Bytes(), stderr.String(), res.ExitCode, out)
	}
	return wait, stop, nil
}

// listenIn starts the listen probe in sb, recording what reaches it.
func (s *session) listenIn(ctx context.Context, sb *sbx, rec *recorder) error {
	req, err := execReq("listen", probe.ListenArgs{TCP: []string{fmt.Sprintf(":%d", neighbourPort)},
		UDP: []string{fmt.Sprintf(":%d", neighbourPort)}, Label: "neighbour"}, 0)
	if err != nil {
		return err
	}
	st, err := s.c.Exec(ctx, sb.id, req)
	if err != nil {
		return fmt.Errorf("starting the neighbour's listener: %w", err)
	}
	s.onCleanup(func() { st.Close() })
	pr, pw := io.Pipe()
	ready := make(chan struct{})
	go readSeen(pr, rec, ready)
	go func() {
		defer pw.Close()
		for {
			ev, err := st.Next()
			if err != nil || ev.Type == apiv1.EventEnd {
				return
			}
			if ev.Type == apiv1.EventStdout {
				_, _ = pw.Write(ev.Data)
			}
		}
	}()
	select {
	case <-ready:
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("the neighbour's listener did not start")
	}
}

// track has cleanup remove sandbox id.
func (s *session) track(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, id)
}

// onCleanup has cleanup call f (before the sandboxes are removed, last
// added first).
func (s *session) onCleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, f)
}

// cleanup stops background probes, removes the session's snapshots and
// sandboxes.
func (s *session) cleanup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	for _, id := range s.snaps {
		_, _ = s.c.RemoveSnapshot(ctx, id)
	}
	for _, id := range s.ids {
		if _, err := s.c.Terminate(ctx, id); err != nil && !isNotFound(err) {
			s.logf("%s: removing %s: %v", s.rt, id, err)
		}
	}
}

func isNotFound(err error) bool { return errCode(err) == "not_found" }

// errCode is the API error code of err ("" for other errors).
func errCode(err error) string {
	var e *corral.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// capped is a buffer that keeps at most max bytes (the rest is counted and
// dropped): a probe's output is bounded by the host, not by the probe.
type capped struct {
	bytes.Buffer
	max     int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room < len(p) {
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		c.dropped += int64(len(p) - max(room, 0))
		return len(p), nil
	}
	return c.Buffer.Write(p)
}
