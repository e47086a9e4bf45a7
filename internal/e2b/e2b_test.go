package e2b

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
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
)

// The E2B face over a real manager, real records and the in-process
// runtime (the real agent, isolating nothing), so requests go through to
// real sandboxes without root. Without a builder, "base" is Corral's
// base image (test/e2e/e2b_sdk_test.go covers the built one with the
// SDK itself).

const (
	testToken = "0123abcd"
	testKey   = KeyPrefix + testToken
)

type env struct {
	t   *testing.T
	m   *manager.Manager
	srv *httptest.Server
}

func newEnv(t *testing.T) *env { return newEnvRuntime(t, "") }

// newEnvRuntime is newEnv with rt as the E2B face's runtime (Config.Runtime).
func newEnvRuntime(t *testing.T, rt string) *env {
	t.Helper()
	dir := t.TempDir()
	rec, err := records.Open(context.Background(), filepath.Join(dir, "corral.db"), seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	m, err := manager.New(context.Background(), manager.Config{
		StateDir: dir, BaseRootFS: "/", AgentBinary: "/proc/self/exe", Records: rec,
		Runtimes: map[string]runtime.Runtime{"gvisor": inproc.New("gvisor"), "vm": inproc.New("vm")}, MaxSandboxes: 8,
		Logger: slog.New(slog.DiscardHandler), AgentTimeout: 10 * time.Second, MetricsInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	mux := http.NewServeMux()
	mux.Handle("/e2b/", http.StripPrefix("/e2b", New(Config{Manager: m, Token: testToken, Runtime: rt, Log: slog.New(slog.DiscardHandler)})))
	e := &env{t: t, m: m, srv: httptest.NewServer(mux)}
	t.Cleanup(e.srv.Close)
	return e
}

// do sends a request with the key (key "" sends none) and returns the
// status, the X-Next-Token header and the body.
func (e *env) do(method, path, key, body string) (int, string, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+"/e2b"+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Next-Token"), b
}

// create makes a sandbox through the E2B face and returns its id.
func (e *env) create(body string) string {
	e.t.Helper()
	st, _, b := e.do("POST", "/v2/sandboxes", testKey, body)
	if st != http.StatusCreated {
		e.t.Fatalf("create %s: %d %s", body, st, b)
	}
	var out sandboxOut
	if err := json.Unmarshal(b, &out); err != nil {
		e.t.Fatal(err)
	}
	if out.EnvdVersion != EnvdVersion || out.EnvdAccessToken == "" || out.TemplateID == "" {
		e.t.Fatalf("create answered %s", b)
	}
	e.t.Cleanup(func() { e.do("DELETE", "/sandboxes/"+out.SandboxID, testKey, "") })
	return out.SandboxID
}

func (e *env) info(id string) sandboxDetail {
	e.t.Helper()
	st, _, b := e.do("GET", "/sandboxes/"+id, testKey, "")
	if st != http.StatusOK {
		e.t.Fatalf("info: %d %s", st, b)
	}
	var d sandboxDetail
	if err := json.Unmarshal(b, &d); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// wantError checks an answer is E2B's error shape with status and a
// message containing want.
func wantError(t *testing.T, st int, b []byte, status int, want string) {
	t.Helper()
	var e apiError
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("not E2B's error shape: %s (%v)", b, err)
	}
	if st != status || e.Code != status || !strings.Contains(e.Message, want) {
		t.Fatalf("got %d %s, want %d naming %q", st, b, status, want)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ name, key, want string }{
		{"missing", "", "missing X-API-KEY"},
		{"not e2b shaped", "abc", "invalid API key"},
		{"wrong token", KeyPrefix + "ffff", "invalid API key"},
		{"bare token", testToken, "invalid API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, b := e.do("GET", "/v2/sandboxes", tc.key, "")
			wantError(t, st, b, http.StatusUnauthorized, tc.want)
		})
	}
	st, _, b := e.do("GET", "/v2/sandboxes", testKey, "")
	if st != http.StatusOK || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("list with the key: %d %s", st, b)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	id := e.create(`{"templateID":"base"}`)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"unknown template", "POST", "/v2/sandboxes", `{"templateID":"no-such-template"}`, 404, `template "no-such-template" not found`},
		{"no template", "POST", "/v2/sandboxes", `{}`, 400, "templateID"},
		{"template with spaces", "POST", "/sandboxes", `{"templateID":"a b"}`, 400, "templateID"},
		{"negative timeout", "POST", "/v2/sandboxes", `{"templateID":"base","timeout":-1}`, 400, "timeout"},
		{"timeout past a day", "POST", "/v2/sandboxes", `{"templateID":"base","timeout":86401}`, 400, "timeout"},
		{"timeout a string", "POST", "/v2/sandboxes", `{"templateID":"base","timeout":"1"}`, 400, "timeout"},
		{"unknown field", "POST", "/v2/sandboxes", `{"templateID":"base","gpu":true}`, 400, "gpu"},
		{"mcp", "POST", "/v2/sandboxes", `{"templateID":"base","mcp":{"x":{}}}`, 400, "mcp"},
		{"volumes", "POST", "/v2/sandboxes", `{"templateID":"base","volumeMounts":[{"name":"v","path":"/v"}]}`, 400, "volumeMounts"},
		{"reserved metadata", "POST", "/v2/sandboxes", `{"templateID":"base","metadata":{"corral.pool":"x"}}`, 400, "metadata"},
		{"bad metadata key", "POST", "/v2/sandboxes", `{"templateID":"base","metadata":{"a b":"x"}}`, 400, "metadata"},
		{"bad env", "POST", "/v2/sandboxes", `{"templateID":"base","envVars":{"A=B":"x"}}`, 400, "env"},
		{"deny chosen ranges", "POST", "/v2/sandboxes", `{"templateID":"base","network":{"denyOut":["10.0.0.0/8"]}}`, 400, "network.denyOut"},
		{"egress proxy", "POST", "/v2/sandboxes", `{"templateID":"base","network":{"egressProxy":{"address":"p:1"}}}`, 400, "network.egressProxy"},
		{"resume without pause", "POST", "/v2/sandboxes", `{"templateID":"base","autoResume":{"enabled":true}}`, 400, "autoResume"},
		{"fs-only auto pause with auto resume", "POST", "/v2/sandboxes", `{"templateID":"base","autoPause":true,"autoPauseMemory":false,"autoResume":{"enabled":true}}`, 400, "autoPauseMemory"},
		{"fs-only auto pause without pause", "POST", "/v2/sandboxes", `{"templateID":"base","autoPauseMemory":false}`, 400, "autoPauseMemory"},
		{"bad onTimeout", "POST", "/v2/sandboxes", `{"templateID":"base","lifecycle":{"onTimeout":"sleep"}}`, 400, "lifecycle.onTimeout"},
		{"not json", "POST", "/v2/sandboxes", `{`, 400, "body"},
		{"unknown sandbox", "GET", "/sandboxes/sb-aaaaaaaaaaaaaaaa", "", 404, `sandbox "sb-aaaaaaaaaaaaaaaa" not found`},
		{"garbage sandbox id", "GET", "/sandboxes/..%2f..%2fetc", "", 404, "not found"},
		{"kill unknown", "DELETE", "/sandboxes/sb-aaaaaaaaaaaaaaaa", "", 404, "not found"},
		{"timeout unknown", "POST", "/sandboxes/sb-aaaaaaaaaaaaaaaa/timeout", `{"timeout":5}`, 404, "not found"},
		{"timeout missing", "POST", "/sandboxes/" + id + "/timeout", `{}`, 400, "timeout"},
		{"connect unknown", "POST", "/v2/sandboxes/sb-aaaaaaaaaaaaaaaa/connect", `{"timeout":5}`, 404, "not found"},
		{"connect v1 without timeout", "POST", "/sandboxes/" + id + "/connect", `{}`, 400, "timeout"},
		{"pause to the filesystem on a runtime that cannot", "POST", "/sandboxes/" + id + "/pause", `{"memory":false}`, 400, "cannot save a sandbox's filesystem"},
		{"resume a running one", "POST", "/sandboxes/" + id + "/resume", `{}`, 409, "not paused"},
		{"list bad state", "GET", "/v2/sandboxes?state=dead", "", 400, "state"},
		{"list bad limit", "GET", "/v2/sandboxes?limit=0", "", 400, "limit"},
		{"list bad token", "GET", "/v2/sandboxes?nextToken=zzz", "", 400, "next"},
		{"list unknown filter", "GET", "/v2/sandboxes?alias=base", "", 400, "alias"},
		{"list bad order", "GET", "/v2/sandboxes?order=sideways", "", 400, "order"},
		{"list bad startedAfter", "GET", "/v2/sandboxes?startedAfter=yesterday", "", 400, "startedAfter"},
		{"list reserved metadata", "GET", "/v2/sandboxes?metadata=corral.pool%3Dx", "", 400, "metadata"},
		{"metrics bad start", "GET", "/sandboxes/" + id + "/metrics?start=yesterday", "", 400, "start"},
		{"metrics of nothing", "GET", "/sandboxes/metrics", "", 400, "sandbox_ids"},
		{"network allow-only", "PUT", "/sandboxes/" + id + "/network", `{"denyOut":["1.2.3.4/32"]}`, 400, "network.denyOut"},
		{"network rules", "PUT", "/sandboxes/" + id + "/network", `{"rules":{"a.com":[{}]}}`, 400, "network.rules"},
		{"delete unknown snapshot", "DELETE", "/templates/snap-none", "", 404, "not found"},
		{"snapshot of unknown", "POST", "/sandboxes/sb-aaaaaaaaaaaaaaaa/snapshots", `{}`, 404, "not found"},
		{"no route", "GET", "/nope", "", 404, "no route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, b := e.do(tc.method, tc.path, testKey, tc.body)
			wantError(t, st, b, tc.status, tc.want)
		})
	}
	// Nothing of it changed the sandbox or made another.
	if d := e.info(id); d.State != "running" {
		t.Fatalf("sandbox after bad input: %+v", d)
	}
	st, _, b := e.do("GET", "/v2/sandboxes", testKey, "")
	var all []listedSandbox
	if err := json.Unmarshal(b, &all); st != 200 || err != nil || len(all) != 1 {
		t.Fatalf("after bad input the list is %d %s", st, b)
	}
}

// The operator's --e2b-runtime decides the runtime of what E2B clients
// create from a template (their API has no field for it).
func TestRuntimeChoice(t *testing.T) {
	for _, rt := range []string{"", "gvisor", "vm"} {
		e := newEnvRuntime(t, rt)
		sb, err := e.m.Get(context.Background(), e.create(`{"templateID":"base"}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := cmp.Or(rt, "gvisor"); sb.Spec.Runtime != want {
			t.Errorf("with Runtime %q the sandbox runs on %q, want %q", rt, sb.Spec.Runtime, want)
		}
	}
}

func TestCreateInfoListKill(t *testing.T) {
	e := newEnv(t)
	a := e.create(`{"templateID":"base","timeout":120,"metadata":{"team":"red","n":"1"},"envVars":{"A":"1"},"autoPause":true,"autoResume":{"enabled":true}}`)
	b := e.create(`{"templateID":"base","metadata":{"team":"red","n":"2"},"allow_internet_access":false}`)
	c := e.create(`{"templateID":"base","metadata":{"team":"blue"}}`)

	d := e.info(a)
	if d.TemplateID != "base" || d.Metadata["team"] != "red" || len(d.Metadata) != 2 || d.State != "running" ||
		!d.Lifecycle.AutoResume || d.Lifecycle.OnTimeout != "pause" || d.EnvdVersion != EnvdVersion {
		t.Fatalf("info of a: %+v", d)
	}
	end, _ := time.Parse(time.RFC3339Nano, d.EndAt)
	if left := time.Until(end); left < 100*time.Second || left > 121*time.Second {
		t.Fatalf("a ends in %s, want about 120s", left)
	}
	if d := e.info(b); d.AllowInternetAccess == nil || *d.AllowInternetAccess {
		t.Fatalf("info of b: %+v", d)
	}

	// Paging: two pages of the red ones, newest first (E2B's default),
	// then oldest first.
	e.pages(t, "", b+","+a)
	e.pages(t, "&order=asc", a+","+b)
	// startedAfter and template.
	e.pages(t, "&startedAfter="+url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)), "")
	e.pages(t, "&startedAfter="+url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)), b+","+a)
	e.pages(t, "&template=base", b+","+a)
	e.pages(t, "&template=other", "")
	if st, _, body := e.do("GET", "/sandboxes?metadata=team%3Dblue", testKey, ""); st != 200 || !strings.Contains(string(body), c) || strings.Contains(string(body), a) {
		t.Fatalf("v1 list of blue: %d %s", st, body)
	}

	if st, _, body := e.do("DELETE", "/sandboxes/"+b, testKey, ""); st != http.StatusNoContent {
		t.Fatalf("kill: %d %s", st, body)
	}
	st, _, body := e.do("GET", "/sandboxes/"+b, testKey, "")
	wantError(t, st, body, 404, "not found")
	st, _, body = e.do("DELETE", "/sandboxes/"+b, testKey, "")
	wantError(t, st, body, 404, "not found")
}

func TestTimeoutAndConnect(t *testing.T) {
	e := newEnv(t)
	id := e.create(`{"templateID":"base","timeout":60}`)
	endOf := func() time.Time {
		t.Helper()
		end, err := time.Parse(time.RFC3339Nano, e.info(id).EndAt)
		if err != nil {
			t.Fatal(err)
		}
		return end
	}
	before := endOf()
	// connect with a shorter timeout never shortens.
	if st, _, b := e.do("POST", "/v2/sandboxes/"+id+"/connect", testKey, `{"timeout":5}`); st != 200 {
		t.Fatalf("connect: %d %s", st, b)
	}
	if got := endOf(); !got.Equal(before) {
		t.Fatalf("connect with 5s moved the end from %s to %s", before, got)
	}
	// A longer one extends.
	if st, _, b := e.do("POST", "/sandboxes/"+id+"/connect", testKey, `{"timeout":600}`); st != 200 {
		t.Fatalf("connect v1: %d %s", st, b)
	}
	if got := endOf(); time.Until(got) < 590*time.Second {
		t.Fatalf("connect with 600s: ends at %s", got)
	}
	// setTimeout shortens, and the sandbox ends then.
	if st, _, b := e.do("POST", "/sandboxes/"+id+"/timeout", testKey, `{"timeout":1}`); st != http.StatusNoContent {
		t.Fatalf("timeout: %d %s", st, b)
	}
	testwait.For(t, 20*time.Second, "the sandbox to end at its timeout", func() bool {
		st, _, _ := e.do("GET", "/sandboxes/"+id, testKey, "")
		return st == 404
	})
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	id := e.create(`{"templateID":"base"}`)
	var ms []metric
	testwait.For(t, 10*time.Second, "a metrics sample", func() bool {
		st, _, b := e.do("GET", "/sandboxes/"+id+"/metrics", testKey, "")
		if err := json.Unmarshal(b, &ms); st != 200 || err != nil {
			t.Fatalf("metrics: %d %s", st, b)
		}
		return len(ms) > 0
	})
	if ms[0].CPUCount < 1 || ms[0].Timestamp == "" {
		t.Fatalf("sample %+v", ms[0])
	}
	st, _, b := e.do("GET", "/sandboxes/metrics?sandbox_ids="+id+",sb-aaaaaaaaaaaaaaaa", testKey, "")
	var many sandboxesWithMetrics
	if err := json.Unmarshal(b, &many); st != 200 || err != nil || len(many.Sandboxes) != 1 {
		t.Fatalf("metrics of many: %d %s", st, b)
	}
}

// policyOf and networkOut translate E2B's egress settings both ways (a
// daemon with networking enforces them: test/e2e).
func TestPolicyOf(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		name  string
		allow *bool
		n     *networkConfig
		want  string // allowOut as info gives it back; "block"; "" for the default
	}{
		{"default", nil, nil, ""},
		{"internet allowed", &yes, nil, ""},
		{"no internet", &no, nil, "block"},
		{"deny all", nil, &networkConfig{DenyOut: []string{allTraffic}}, "block"},
		{"allow alone changes nothing", nil, &networkConfig{AllowOut: []string{"198.51.100.7"}}, ""},
		{"allowlist", nil, &networkConfig{DenyOut: []string{allTraffic}, AllowOut: []string{"198.51.100.7", "198.51.100.0/24", "Example.com"}}, "198.51.100.0/24,198.51.100.7/32,example.com"},
		{"no internet but some", &no, &networkConfig{AllowOut: []string{"*.example.com"}}, "*.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policyOf(tc.allow, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			allow, n := networkOut(p)
			got := ""
			switch {
			case p.BlockNetwork:
				got = "block"
				if *allow {
					t.Fatal("blocked but allowInternetAccess")
				}
			case n != nil:
				got = strings.Join(n.AllowOut, ",")
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := policyOf(nil, &networkConfig{DenyOut: []string{allTraffic}, AllowOut: []string{"bad name!"}}); err == nil || !strings.Contains(err.Error(), "network.allowOut") {
		t.Fatalf("a bad allowOut entry: %v", err)
	}
}

// pages lists the red sandboxes a page of one at a time with the extra
// query, and wants their ids in that order, comma-joined.
func (e *env) pages(t *testing.T, extra, want string) {
	t.Helper()
	var seen []string
	next := ""
	for range 4 {
		st, tok, body := e.do("GET", "/v2/sandboxes?limit=1&metadata=team%3Dred"+extra+"&nextToken="+next, testKey, "")
		var page []listedSandbox
		if err := json.Unmarshal(body, &page); st != 200 || err != nil {
			t.Fatalf("list%s: %d %s", extra, st, body)
		}
		for _, p := range page {
			seen = append(seen, p.SandboxID)
		}
		if next = tok; next == "" {
			break
		}
	}
	if strings.Join(seen, ",") != want {
		t.Fatalf("red pages%s gave %v, want %s", extra, seen, want)
	}
}
