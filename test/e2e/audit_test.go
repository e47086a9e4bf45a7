package e2e

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"

	_ "modernc.org/sqlite" // to edit the store as an intruder would
)

// TestAuditTrail: a create, an exec, an upload, a denied connection and a
// terminate each appear once in the audit trail, in order, with their
// fields and caller; the trail verifies, through the daemon and as an
// export; an entry edited directly in the store is reported by
// `corral audit verify` with exit 1.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	d := startDaemon(t)
	sum := sha256.Sum256([]byte(d.token))
	caller := "token:" + hex.EncodeToString(sum[:6])

	id := d.create("--block-network")
	d.mustCLI("exec", id, "-u", "root", "-w", "/tmp", "-e", "AUDIT_SECRET=hunter2", "--", "echo", "audit-exec")
	content := "what the audit trail hashes\n"
	src := filepath.Join(t.TempDir(), "up.txt")
	if err := os.WriteFile(src, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("fs", "put", id, src, "/tmp/audit-up.txt")
	// A connection to the sandbox's own gateway (a host address: nothing
	// leaves the machine even if the policy were wrong), refused by
	// block_network. One SYN: the connect gives up before gVisor's first
	// retransmission (1 s).
	probe := `import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("198.51.100.1", 9))  # no packet: only the route lookup
a = s.getsockname()[0].split(".")
gw = ".".join(a[:3] + [str(int(a[3]) - 1)])
print(gw)
c = socket.socket()
c.settimeout(0.5)
try:
    c.connect((gw, 9))
except OSError:
    pass
`
	out, _, _ := d.cli("", "exec", id, "--", "python3", "-c", probe)
	gw := strings.TrimSpace(out)
	if gw == "" {
		t.Fatalf("the probe printed no gateway")
	}
	waitAudit(t, d, id, "egress_denied")
	d.mustCLI("rm", id)

	entries := auditLog(t, d, id)
	var kinds []string
	byKind := map[string][]apiv1.AuditEntry{}
	for _, e := range entries {
		if e.Kind == "api" {
			continue
		}
		kinds = append(kinds, e.Kind)
		byKind[e.Kind] = append(byKind[e.Kind], e)
	}
	// The probe's own exec ends after its denial is recorded, or just
	// before: both orders are right.
	got := strings.Join(kinds, " ")
	if got != "create exec file_write egress_denied exec terminate" && got != "create exec file_write exec egress_denied terminate" {
		t.Fatalf("audit kinds of %s: %s", id, got)
	}
	check := func(e apiv1.AuditEntry, wantCaller string, want map[string]string) {
		t.Helper()
		if e.Caller != wantCaller {
			t.Errorf("%s entry %d: caller %q, want %q", e.Kind, e.Seq, e.Caller, wantCaller)
		}
		for k, v := range want {
			if e.Fields[k] != v {
				t.Errorf("%s entry %d: %s = %q, want %q (fields %v)", e.Kind, e.Seq, k, e.Fields[k], v, e.Fields)
			}
		}
	}
	check(byKind["create"][0], caller, map[string]string{"runtime": "gvisor", "image": "base"})
	ex := byKind["exec"][0]
	check(ex, caller, map[string]string{"argv": `["echo","audit-exec"]`, "user": "root", "cwd": "/tmp", "exit_code": "0"})
	if ex.Fields["duration_ms"] == "" {
		t.Errorf("exec entry without a duration: %v", ex.Fields)
	}
	want := sha256.Sum256([]byte(content))
	check(byKind["file_write"][0], caller, map[string]string{"path": "/tmp/audit-up.txt", "size": fmt.Sprint(len(content)),
		"sha256": hex.EncodeToString(want[:]), "result": "ok"})
	check(byKind["egress_denied"][0], "", map[string]string{"dst": gw, "port": "9", "proto": "tcp", "reason": "blocked"})
	check(byKind["terminate"][0], caller, nil)
	if byKind["terminate"][0].Fields["reason"] == "" {
		t.Errorf("terminate without a reason: %v", byKind["terminate"][0].Fields)
	}
	// The API calls that changed something, with their status.
	calls := map[string]string{}
	for _, e := range entries {
		if e.Kind == "api" {
			if e.Caller != caller {
				t.Errorf("api entry %d: caller %q", e.Seq, e.Caller)
			}
			calls[e.Fields["method"]+" "+e.Fields["path"]] = e.Fields["status"]
		}
	}
	for call, status := range map[string]string{"PUT /v1/sandboxes/" + id + "/files": "200", "DELETE /v1/sandboxes/" + id: "200",
		"POST /v1/sandboxes/" + id + "/processes": "200"} {
		if calls[call] != status {
			t.Errorf("api call %s: status %q, want %s (calls %v)", call, calls[call], status, calls)
		}
	}

	// The whole trail verifies, through the daemon and as an export; no
	// env value is in it.
	if out := d.mustCLI("audit", "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("audit verify: %q", out)
	}
	export := d.mustCLI("audit", "export")
	if strings.Contains(export, "hunter2") || strings.Contains(export, d.token) {
		t.Errorf("the export holds an env value or the token")
	}
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(file, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("audit", "verify", "--file", file)
	edited := strings.Replace(export, `audit-exec`, `audit-exex`, 1)
	if err := os.WriteFile(file, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := d.cli("", "audit", "verify", "--file", file); code != 1 || !strings.Contains(errs, fmt.Sprintf("entry %d: edited", ex.Seq)) {
		t.Errorf("verify of an edited export: exit %d, %q", code, errs)
	}

	// An entry edited in the store itself.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.state, "corral.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE audit SET fields = replace(fields, 'audit-exec', 'innocent') WHERE seq = ?`, ex.Seq); err != nil {
		t.Fatal(err)
	}
	_, errs, code := d.cli("", "audit", "verify")
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("entry %d: edited", ex.Seq)) {
		t.Errorf("verify after an edit in the store: exit %d, %q", code, errs)
	}
}

// auditLog is `corral audit log ID --json`, parsed.
func auditLog(t *testing.T, d *daemon, id string) []apiv1.AuditEntry {
	t.Helper()
	var out []apiv1.AuditEntry
	for _, line := range strings.Split(strings.TrimSpace(d.mustCLI("audit", "log", id, "--json")), "\n") {
		var e apiv1.AuditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// waitAudit waits until the trail holds an entry of kind for sandbox id.
func waitAudit(t *testing.T, d *daemon, id, kind string) {
	t.Helper()
	waitFor(t, 15*time.Second, "a "+kind+" entry for "+id+" in the trail", func() bool {
		return strings.TrimSpace(d.mustCLI("audit", "log", id, "--kind", kind, "--json")) != ""
	})
}
