package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"corral/internal/audit"
	"corral/internal/manager"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// newAuditEnv is newAPIEnv with the audit trail on, served by a server
// that records its calls.
func newAuditEnv(t *testing.T) *apiEnv {
	t.Helper()
	var trail *audit.Trail
	e := newAPIEnvWith(t, func(c *manager.Config) {
		tr, err := audit.Open(context.Background(), audit.Config{Store: c.Records, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		trail, c.Audit = tr, tr
	})
	s := New(e.m, nil, testToken, "test", slog.New(slog.DiscardHandler))
	s.SetAudit(trail, trail)
	e.srv = httptest.NewServer(s)
	t.Cleanup(e.srv.Close)
	e.c = corral.New(e.srv.URL, testToken)
	return e
}

func TestAuditTrailAPI(t *testing.T) {
	e := newAuditEnv(t)
	ctx := context.Background()
	caller := audit.TokenCaller(testToken)
	sb := e.create(apiv1.CreateSandboxRequest{Name: "audited"})
	if _, code := e.run(sb.ID, apiv1.ExecRequest{Cmd: []string{"sh", "-c", "exit 3"}, Env: map[string]string{"SECRET": "hunter2"}}); code != 3 {
		t.Fatalf("exec exit %d", code)
	}
	content := []byte("hashed while it streams\n")
	if _, err := e.c.WriteFile(ctx, sb.ID, "up.txt", bytes.NewReader(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Remove(ctx, sb.ID, "up.txt", false); err != nil {
		t.Fatal(err)
	}
	// A refused call is recorded with its status, by the wrong token's hash.
	req, _ := http.NewRequest("DELETE", e.srv.URL+"/v1/sandboxes/"+sb.ID, nil)
	req.Header.Set("Authorization", "Bearer wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("wrong token: %v %v", resp, err)
	}
	if _, err := e.c.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}

	page, err := e.c.Audit(ctx, corral.AuditQuery{Sandbox: "audited", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var kinds, calls []string
	byKind := map[string]apiv1.AuditEntry{}
	for _, en := range page.Entries {
		if en.Kind == "api" {
			calls = append(calls, en.Fields["method"]+" "+en.Fields["status"]+" "+en.Caller)
			continue
		}
		kinds = append(kinds, en.Kind)
		byKind[en.Kind] = en
		if en.Caller != caller {
			t.Errorf("%s entry: caller %q, want %q", en.Kind, en.Caller, caller)
		}
	}
	if got := strings.Join(kinds, " "); got != "create exec file_write file_remove terminate" {
		t.Fatalf("kinds: %s", got)
	}
	want := map[string]string{"POST 200 " + caller: "exec", "PUT 200 " + caller: "write", "DELETE 401 " + audit.TokenCaller("wrong"): "refused",
		"DELETE 200 " + caller: "terminate"}
	for _, c := range calls {
		delete(want, c)
	}
	if len(want) != 0 {
		t.Errorf("api entries %v miss %v", calls, want)
	}
	if cf := byKind["create"].Fields; cf["runtime"] != "gvisor" || cf["image"] == "" || cf["name"] != "audited" {
		t.Errorf("create entry: %v", cf)
	}
	ex := byKind["exec"]
	if ex.Fields["argv"] != `["sh","-c","exit 3"]` || ex.Fields["exit_code"] != "3" || ex.Fields["user"] != e.user || ex.Fields["duration_ms"] == "" {
		t.Errorf("exec entry: %v", ex.Fields)
	}
	sum := sha256.Sum256(content)
	if fw := byKind["file_write"].Fields; fw["size"] != fmt.Sprint(len(content)) || fw["sha256"] != hex.EncodeToString(sum[:]) || !strings.HasSuffix(fw["path"], "up.txt") {
		t.Errorf("file_write entry: %v", fw)
	}
	if tf := byKind["terminate"].Fields; tf["reason"] == "" {
		t.Errorf("terminate entry: %v", tf)
	}

	rep, err := e.c.AuditVerify(ctx)
	if err != nil || !rep.OK || rep.Entries < int64(len(page.Entries)) || rep.Head == "" {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	body, err := e.c.AuditExport(ctx, corral.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	export, _ := io.ReadAll(body)
	body.Close()
	if bytes.Contains(export, []byte("hunter2")) || bytes.Contains(export, []byte(testToken)) {
		t.Errorf("the export holds an env value or the token")
	}
	var v audit.Verifier
	for _, line := range bytes.Split(bytes.TrimSpace(export), []byte("\n")) {
		var en apiv1.AuditEntry
		if err := json.Unmarshal(line, &en); err != nil {
			t.Fatal(err)
		}
		v.Add(audit.Entry(en))
	}
	if b, n, head := v.Result(); b != nil || n != rep.Entries || head != rep.Head {
		t.Errorf("the export verified offline: %v, %d entries, head %s; the daemon's: %+v", b, n, head, rep)
	}

	// Paging and filters.
	first, err := e.c.Audit(ctx, corral.AuditQuery{Kinds: []string{"exec", "file_write"}, Limit: 1})
	if err != nil || len(first.Entries) != 1 || first.Entries[0].Kind != "exec" || first.Next == "" {
		t.Fatalf("first page: %+v %v", first, err)
	}
	after, _ := json.Number(first.Next).Int64()
	second, err := e.c.Audit(ctx, corral.AuditQuery{Kinds: []string{"exec", "file_write"}, After: after, Limit: 1})
	if err != nil || len(second.Entries) != 1 || second.Entries[0].Kind != "file_write" {
		t.Fatalf("second page: %+v %v", second, err)
	}
}

func TestAuditBadInput(t *testing.T) {
	e := newAuditEnv(t)
	for _, q := range []string{"kind=exec,nope", "since=yesterday", "since=-1h", "limit=0", "limit=1001", "after=-1", "after=x",
		"sandbox=" + strings.Repeat("x", 300)} {
		code, body := e.raw("GET", "/v1/audit?"+q, "")
		if code/100 != 4 || !strings.Contains(body, `"code"`) {
			t.Errorf("GET /v1/audit?%s: %d %s", q, code, body)
		}
	}
	off := newAPIEnv(t)
	for _, p := range []string{"/v1/audit", "/v1/audit/verify", "/v1/audit/export"} {
		if code, body := off.raw("GET", p, ""); code != http.StatusConflict || !strings.Contains(body, "--audit=false") {
			t.Errorf("%s with the trail off: %d %s", p, code, body)
		}
	}
}
