package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/manager"
	"corral/internal/records"
	"corral/internal/runtime"
	"corral/internal/runtime/inproc"
	"corral/internal/seal"
	"corral/internal/testwait"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// The API over a real manager, real records and the in-process runtime
// (internal/runtime/inproc: the real agent, isolating nothing), so the
// HTTP layer and the manager are tested end to end without root. A
// sandbox's processes run as the test's user.

const testToken = "test-token"

type apiEnv struct {
	t      *testing.T
	rt     *inproc.Runtime
	m      *manager.Manager
	srv    *httptest.Server
	c      *corral.Client
	user   string // the sandboxes' default user
	userID string // its uid, as stat prints it
}

func newAPIEnv(t *testing.T, pools ...manager.WarmPoolConfig) *apiEnv {
	t.Helper()
	return newAPIEnvWith(t, func(c *manager.Config) { c.WarmPools = pools })
}

// newAPIEnvWith is newAPIEnv with the manager's configuration edited.
func newAPIEnvWith(t *testing.T, edit func(*manager.Config)) *apiEnv {
	t.Helper()
	dir := t.TempDir()
	rec, err := records.Open(context.Background(), filepath.Join(dir, "corral.db"), seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	e := &apiEnv{t: t, rt: inproc.New("gvisor")}
	e.user, e.userID = sandboxUser(t)
	cfg := manager.Config{
		StateDir: dir, BaseRootFS: "/", AgentBinary: "/proc/self/exe", Records: rec,
		Runtimes: map[string]runtime.Runtime{"gvisor": e.rt}, MaxSandboxes: 8,
		Logger: slog.New(slog.DiscardHandler), AgentTimeout: 10 * time.Second, MetricsInterval: 100 * time.Millisecond,
	}
	edit(&cfg)
	m, err := manager.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(m.Close)
	e.srv = httptest.NewServer(New(m, nil, testToken, "test", slog.New(slog.DiscardHandler)))
	t.Cleanup(e.srv.Close)
	e.c = corral.New(e.srv.URL, testToken)
	return e
}

// sandboxUser is who the in-process agent runs processes as: the test's
// own user (an unprivileged agent cannot switch; as root, another user
// could not enter the test's 0700 temporary directories). test/e2e covers
// images whose user is someone else.
func sandboxUser(t *testing.T) (name, uid string) {
	if os.Geteuid() == 0 {
		return "root", "0"
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Uid, u.Uid
}

func (e *apiEnv) create(req apiv1.CreateSandboxRequest) *apiv1.Sandbox {
	e.t.Helper()
	if req.User == "" {
		req.User = e.user
	}
	sb, err := e.c.Create(context.Background(), req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _, _ = e.c.Terminate(context.Background(), sb.ID) })
	return sb
}

// run execs cmd and returns stdout and the exit code.
func (e *apiEnv) run(id string, req apiv1.ExecRequest) (string, int) {
	e.t.Helper()
	var out, errb bytes.Buffer
	res, err := e.c.Run(context.Background(), id, req, nil, &out, &errb)
	if err != nil {
		e.t.Fatalf("exec %v: %v (stderr %q)", req.Cmd, err, errb.String())
	}
	return out.String(), res.ExitCode
}

// raw sends a request with the test token and returns status and body.
func (e *apiEnv) raw(method, path, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAPILifecycle(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	sb := e.create(apiv1.CreateSandboxRequest{Name: "life", Tags: map[string]string{"team": "a"}})
	if sb.State != "running" || sb.Runtime != "gvisor" || sb.User != e.user || len(sb.CreatePhases) == 0 {
		t.Fatalf("created: %+v", sb)
	}
	if out, code := e.run(sb.ID, apiv1.ExecRequest{Cmd: []string{"sh", "-c", "echo hi; exit 7"}}); out != "hi\n" || code != 7 {
		t.Errorf("exec: %q exit %d", out, code)
	}
	var in bytes.Buffer
	in.WriteString("through stdin\n")
	var out bytes.Buffer
	if _, err := e.c.Run(ctx, sb.ID, apiv1.ExecRequest{Cmd: []string{"cat"}}, &in, &out, io.Discard); err != nil || out.String() != "through stdin\n" {
		t.Errorf("stdin: %q %v", out.String(), err)
	}
	list, err := e.c.List(ctx, "")
	if err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	evs, err := e.c.Events(ctx, sb.ID)
	if err != nil || len(evs) == 0 || evs[0].Kind != "running" {
		t.Errorf("events: %+v %v", evs, err)
	}
	if rec, err := e.c.Terminate(ctx, sb.ID); err != nil || rec.State != "terminated" || rec.ExitCode == nil || *rec.ExitCode != 137 {
		t.Fatalf("terminate: %+v %v", rec, err)
	}
	if !e.rt.Destroyed(sb.ID) {
		t.Error("terminate did not destroy the sandbox")
	}
	if w, err := e.c.Wait(ctx, sb.ID, 5); err != nil || w.ExitCode != 137 || w.EndReason != "terminated" {
		t.Errorf("wait: %+v %v", w, err)
	}
	_, err = e.c.Run(ctx, sb.ID, apiv1.ExecRequest{Cmd: []string{"true"}}, nil, io.Discard, io.Discard)
	if !isCode(err, "failed_precondition") {
		t.Errorf("exec after terminate: %v", err)
	}
}

// isCode reports whether err is an API error of code.
func isCode(err error, code string) bool {
	var ae *corral.Error
	return errors.As(err, &ae) && ae.Code == code
}

// Every bad request is a 4xx whose JSON body names the problem.
func TestAPIBadInput(t *testing.T) {
	e := newAPIEnv(t)
	sb := e.create(apiv1.CreateSandboxRequest{})
	id := sb.ID
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"unknown field", "POST", "/v1/sandboxes", `{"cpus": 2}`, 400, "cpus"},
		{"wrong type", "POST", "/v1/sandboxes", `{"memory_mb": "lots"}`, 400, "memory_mb"},
		{"bad runtime", "POST", "/v1/sandboxes", `{"runtime": "docker"}`, 400, "runtime"},
		{"limit below request", "POST", "/v1/sandboxes", `{"cpu": 2, "cpu_limit": 1}`, 400, "cpu_limit"},
		{"the daemon's tag", "POST", "/v1/sandboxes", `{"tags": {"corral.build/step": "1"}}`, 400, "tags"},
		{"the daemon's snapshot name", "POST", "/v1/sandboxes/" + id + "/snapshots/memory", `{"name": "corral.fork-1"}`, 400, "name"},
		{"trailing data", "POST", "/v1/sandboxes", `{} {}`, 400, "trailing"},
		{"empty body", "POST", "/v1/sandboxes", ``, 400, "empty"},
		{"huge body", "POST", "/v1/sandboxes", `{"name": "` + strings.Repeat("a", 2<<20) + `"}`, 400, "larger"},
		{"hostile id", "GET", "/v1/sandboxes/..%2f..%2fetc", ``, 404, ""},
		{"unknown id", "GET", "/v1/sandboxes/sb-aaaaaaaaaaaaaaaa", ``, 404, "not_found"},
		{"exec without cmd", "POST", "/v1/sandboxes/" + id + "/processes", `{}`, 400, "cmd"},
		{"exec with a NUL", "POST", "/v1/sandboxes/" + id + "/processes", `{"cmd": ["a\u0000b"]}`, 400, "cmd"},
		{"file without path", "GET", "/v1/sandboxes/" + id + "/files", ``, 400, "path"},
		{"file with a long user", "GET", "/v1/sandboxes/" + id + "/files?path=x&user=" + strings.Repeat("u", 65), ``, 400, "user"},
		{"mkdir with a bad mode", "POST", "/v1/sandboxes/" + id + "/fs/mkdir", `{"path": "d", "mode": 65535}`, 400, "mode"},
		{"list too deep", "GET", "/v1/sandboxes/" + id + "/fs/list?path=/&depth=99", ``, 400, "depth"},
		{"unknown user", "PUT", "/v1/sandboxes/" + id + "/files?path=x&user=mallory", `x`, 400, "mallory"},
		{"no route", "GET", "/v1/nothing", ``, 404, "no route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := e.raw(tt.method, tt.path, tt.body)
			if status != tt.status || !strings.Contains(body, `"error"`) || !strings.Contains(body, tt.want) {
				t.Errorf("%s %s: %d %.200s, want %d naming %q", tt.method, tt.path, status, body, tt.status, tt.want)
			}
		})
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/sandboxes", nil)
	for _, auth := range []string{"", "Bearer wrong", "Basic " + testToken} {
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, resp.StatusCode)
		}
	}
}

// File calls take exec's defaults: the sandbox's user owns what they
// create, relative paths start at its workdir, and ".." never leaves the
// sandbox's root.
func TestAPIFiles(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	sb := e.create(apiv1.CreateSandboxRequest{Workdir: "/work"})
	if _, err := e.c.MakeDir(ctx, sb.ID, "/work"); err != nil {
		t.Fatal(err)
	}
	ent, err := e.c.WriteFile(ctx, sb.ID, "sub/a.txt", strings.NewReader("alpha"), 0o600)
	if err != nil || ent.Path != "/work/sub/a.txt" || ent.Size != 5 || ent.Owner != e.ownerName(t) {
		t.Fatalf("write of a relative path: %+v %v", ent, err)
	}
	if parent, err := e.c.Stat(ctx, sb.ID, "sub"); err != nil || parent.Owner != e.ownerName(t) {
		t.Errorf("the created parent: %+v %v", parent, err)
	}
	r, size, err := e.c.ReadFile(ctx, sb.ID, "sub/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "alpha" || size != 5 {
		t.Errorf("read back %q (%d)", b, size)
	}
	if _, err := e.c.Rename(ctx, sb.ID, "sub/a.txt", "sub/b.txt"); err != nil {
		t.Fatal(err)
	}
	es, err := e.c.ListDir(ctx, sb.ID, "sub", 1)
	if err != nil || len(es) != 1 || es[0].Path != "/work/sub/b.txt" {
		t.Fatalf("list: %+v %v", es, err)
	}
	if _, err := e.c.Chmod(ctx, sb.ID, "sub/b.txt", 0o640); err != nil {
		t.Fatal(err)
	}
	// ".." cannot climb out: the agent's root is the sandbox's own.
	if ent, err := e.c.WriteFile(ctx, sb.ID, "../../../../escape", strings.NewReader("x"), 0o644); err != nil || ent.Path != "/escape" {
		t.Errorf("a climbing path: %+v %v", ent, err)
	}
	if _, err := os.Stat("/escape"); err == nil {
		t.Fatal("a sandbox file landed on the host's /")
	}
	if err := e.c.Remove(ctx, sb.ID, "sub", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Stat(ctx, sb.ID, "sub"); !isCode(err, "not_found") {
		t.Errorf("stat after remove: %v", err)
	}
	// Exec starts in the workdir too, and resolves a relative cwd in it.
	if out, _ := e.run(sb.ID, apiv1.ExecRequest{Cmd: []string{"sh", "-c", "id -u"}}); strings.TrimSpace(out) != e.userID {
		t.Errorf("exec ran as uid %q, want %s", out, e.userID)
	}
}

// ownerName is how an entry names the sandbox user as its owner.
func (e *apiEnv) ownerName(t *testing.T) string {
	u, err := user.LookupId(e.userID)
	if err != nil {
		return e.userID
	}
	return u.Username
}

// GET /v1/version reports the warm pool with its hits and misses, and a
// create that fits the pool takes a started sandbox.
func TestAPIWarmPoolStats(t *testing.T) {
	e := newAPIEnv(t, manager.WarmPoolConfig{Size: 1})
	ctx := context.Background()
	waitReady := func() {
		t.Helper()
		testwait.For(t, 10*time.Second, "the warm pool to fill", func() bool {
			v, err := e.c.Version(ctx)
			return err == nil && v.WarmPool != nil && v.WarmPool.Ready == 1
		})
	}
	waitReady()
	warm := e.create(apiv1.CreateSandboxRequest{})
	if len(warm.CreatePhases) != 1 || warm.CreatePhases[0].Name != "claim" {
		t.Errorf("a claimed sandbox's phases: %+v", warm.CreatePhases)
	}
	if out, _ := e.run(warm.ID, apiv1.ExecRequest{Cmd: []string{"sh", "-c", "id -u"}}); strings.TrimSpace(out) != e.userID {
		t.Errorf("the claimed sandbox runs as %q, want %s", out, e.userID)
	}
	e.create(apiv1.CreateSandboxRequest{}) // the pool is refilling: a miss, or a hit if it was quick
	waitReady()
	v, err := e.c.Version(ctx)
	if err != nil || v.WarmPool == nil || v.WarmPool.Hits+v.WarmPool.Misses != 2 || v.WarmPool.Hits < 1 || len(v.WarmPools) != 1 {
		t.Fatalf("version: %+v %v", v, err)
	}
	t.Logf("pool: %d hits, %d misses", v.WarmPool.Hits, v.WarmPool.Misses)
	if list, _ := e.c.List(ctx, ""); len(list) != 2 {
		t.Errorf("list shows %d sandboxes, want the 2 created (not the pooled one)", len(list))
	}
}

// DELETE ?wait=false answers once the sandbox is terminating; the teardown
// finishes in the background and wait reports the end.
func TestAPITerminateNoWait(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	sb := e.create(apiv1.CreateSandboxRequest{})
	status, body := e.raw("DELETE", "/v1/sandboxes/"+sb.ID+"?wait=maybe", "")
	if status != 400 || !strings.Contains(body, "wait") {
		t.Errorf("wait=maybe: %d %s", status, body)
	}
	rec, err := e.c.TerminateNoWait(ctx, sb.ID)
	if err != nil || (rec.State != "terminating" && rec.State != "terminated") {
		t.Fatalf("terminate without waiting: %+v %v", rec, err)
	}
	if w, err := e.c.Wait(ctx, sb.ID, 10); err != nil || w.EndReason != "terminated" || w.ExitCode != 137 {
		t.Fatalf("wait after it: %+v %v", w, err)
	}
	if !e.rt.Destroyed(sb.ID) {
		t.Error("the background teardown did not destroy the sandbox")
	}
	if rec, err := e.c.TerminateNoWait(ctx, sb.ID); err != nil || rec.State != "terminated" {
		t.Errorf("again, once ended: %+v %v", rec, err)
	}
}

// The debug endpoint measures the daemon itself, after a collection when
// asked, and refuses a gc value it cannot read.
func TestAPIDebugRuntime(t *testing.T) {
	e := newAPIEnv(t)
	status, body := e.raw("GET", "/v1/debug/runtime?gc=true", "")
	var rt apiv1.DebugRuntime
	if err := json.Unmarshal([]byte(body), &rt); status != 200 || err != nil {
		t.Fatalf("%d %s: %v", status, body, err)
	}
	if !rt.GC || rt.Goroutines < 2 || rt.RSSBytes <= 0 || rt.OpenFDs < 3 || rt.Threads < 1 || rt.HeapAllocBytes == 0 || rt.NumGC == 0 {
		t.Errorf("debug runtime: %+v", rt)
	}
	if status, body := e.raw("GET", "/v1/debug/runtime?gc=maybe", ""); status != 400 || !strings.Contains(body, "gc") {
		t.Errorf("gc=maybe: %d %s", status, body)
	}
}
