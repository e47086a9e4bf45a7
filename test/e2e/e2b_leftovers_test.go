package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"corral/internal/e2b/envd/gen/filesystem"
)

// Issue 14's last pieces, on one daemon: X-Metadata-* upload headers kept
// as user.e2b.* extended attributes (read back inside the sandbox), the
// envd face's /envs and /metrics, and a pause_on_timeout sandbox whose
// lifetime passes while the daemon is down ending paused.
func TestE2BLeftovers(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--metrics-interval", "1s")
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			if rt == "vm" && testing.Short() {
				t.Skip("vm in -short")
			}
			id := d.create("--runtime", rt, "--timeout", "10m", "--env", "GREETING=hi there")
			c := newEnvd(t, d, id, accessToken(t, d, id), true)
			testEnvdMetadata(t, d, c, id, rt)
			if rt == "gvisor" {
				testEnvdEnvsMetrics(t, c)
			}
			d.mustCLI("rm", id)
		})
	}
	t.Run("pause_on_timeout_across_restart", func(t *testing.T) { testPauseOnTimeoutRestart(t, d) })
}

// metadataUpload posts body to path as octet-stream with X-Metadata-*
// headers; it returns the status and the answer's entries.
func metadataUpload(t *testing.T, c *envdClient, path, body string, md map[string]string) (int, []byte, []struct {
	Path     string
	Metadata map[string]string
}) {
	t.Helper()
	h := http.Header{}
	for k, v := range md {
		h.Set("X-Metadata-"+k, v)
	}
	st, b := c.do(t, http.MethodPost, url.Values{"path": {path}}, "application/octet-stream", "", strings.NewReader(body), h)
	var out []struct {
		Path     string
		Metadata map[string]string
	}
	if st == http.StatusOK {
		if err := json.Unmarshal(b, &out); err != nil || len(out) != 1 {
			t.Fatalf("upload answer %s: %v", b, err)
		}
	}
	return st, b, out
}

// xattrsIn lists path's user.e2b.* attributes from inside the sandbox.
func xattrsIn(t *testing.T, d *daemon, id, path string) map[string]string {
	t.Helper()
	script := `import os, sys, json
p = sys.argv[1]
print(json.dumps({n[len("user.e2b."):]: os.getxattr(p, n).decode() for n in os.listxattr(p) if n.startswith("user.e2b.")}))`
	out := d.mustCLI("exec", id, "--", "python3", "-c", script, path)
	got := map[string]string{}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("xattrs of %s: %q: %v", path, out, err)
	}
	return got
}

func testEnvdMetadata(t *testing.T, d *daemon, c *envdClient, id, rt string) {
	md := map[string]string{"Author": "ann", "purpose": "e2e test"}
	want := map[string]string{"author": "ann", "purpose": "e2e test"}
	for _, dir := range []string{"/root", "/tmp"} {
		p := dir + "/meta.txt"
		st, b, out := metadataUpload(t, c, p, "one", md)
		if st != http.StatusOK {
			t.Fatalf("%s: upload with metadata: %d %s", p, st, b)
		}
		inside := xattrsIn(t, d, id, p)
		t.Logf("%s %s: answer %v, inside %v", rt, p, out[0].Metadata, inside)
		if !maps.Equal(out[0].Metadata, want) || !maps.Equal(inside, want) {
			t.Errorf("%s %s: answer's metadata %v, user.e2b.* inside %v; want %v in both", rt, p, out[0].Metadata, inside, want)
		}
		// Stat and ListDir report it as envd's EntryInfo.metadata.
		ctx := context.Background()
		st2, err := c.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: p}))
		if err != nil || !maps.Equal(st2.Msg.GetEntry().GetMetadata(), want) {
			t.Errorf("%s: Stat metadata %v (%v), want %v", p, st2.Msg.GetEntry().GetMetadata(), err, want)
		}
		ls, err := c.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: dir}))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ls.Msg.GetEntries() {
			if e.GetPath() == p && !maps.Equal(e.GetMetadata(), want) {
				t.Errorf("%s: ListDir metadata %v, want %v", p, e.GetMetadata(), want)
			}
		}
		// An upload replaces the set: one key now, then none.
		if st, b, out = metadataUpload(t, c, p, "two", map[string]string{"author": "bob"}); st != http.StatusOK || !maps.Equal(out[0].Metadata, map[string]string{"author": "bob"}) {
			t.Errorf("%s: second upload: %d %s", p, st, b)
		}
		if st, b, out = metadataUpload(t, c, p, "three", nil); st != http.StatusOK || len(out[0].Metadata) != 0 {
			t.Errorf("%s: upload without metadata: %d %s", p, st, b)
		}
		if got := xattrsIn(t, d, id, p); len(got) != 0 {
			t.Errorf("%s: an upload without metadata left %v", p, got)
		}
	}
	// Refused metadata is envd's 400 and writes nothing.
	st, b, _ := metadataUpload(t, c, "/root/refused.txt", "x", map[string]string{"k": "caf\u00e9"})
	if st != http.StatusBadRequest || !strings.Contains(string(b), `"code":400`) || !strings.Contains(string(b), "X-Metadata-") {
		t.Errorf("non-ASCII metadata: %d %s", st, b)
	}
	if _, errs, code := d.cli("", "exec", id, "--", "test", "-e", "/root/refused.txt"); code == 0 {
		t.Errorf("a refused upload wrote its file (%s)", errs)
	}
}

// testEnvdEnvsMetrics: GET /envs is the create's env; GET /metrics the
// daemon's latest sample in envd's shape.
func testEnvdEnvsMetrics(t *testing.T, c *envdClient) {
	st, b := c.get(t, "/envs")
	var env map[string]string
	if err := json.Unmarshal(b, &env); st != http.StatusOK || err != nil || env["GREETING"] != "hi there" {
		t.Errorf("/envs: %d %s", st, b)
	}
	var m struct {
		TS          int64  `json:"ts"`
		CPUCount    int    `json:"cpu_count"`
		MemTotalMiB uint64 `json:"mem_total_mib"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, b = c.get(t, "/metrics")
		if st == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := json.Unmarshal(b, &m); st != http.StatusOK || err != nil || m.CPUCount < 1 || m.MemTotalMiB == 0 || m.TS == 0 ||
		!strings.Contains(string(b), `"mem_used"`) || !strings.Contains(string(b), `"disk_total"`) {
		t.Errorf("/metrics: %d %s", st, b)
	}
}

// get sends a GET of path to the envd face.
func (c *envdClient) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := c.http.Get(c.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// testPauseOnTimeoutRestart: a pause_on_timeout sandbox whose lifetime
// ends while the daemon is stopped is paused when the daemon comes back
// (not ended as a timeout), and E2B's connect resumes it with its files.
func testPauseOnTimeoutRestart(t *testing.T, d *daemon) {
	ctx := context.Background()
	id := d.create("--timeout", "6s", "--pause-on-timeout")
	d.mustCLI("exec", id, "--", "sh", "-c", "echo kept > /root/kept")
	d.stop()
	sb, err := d.client.Get(ctx, id) // the old client reaches nothing now
	if err == nil {
		t.Fatalf("the stopped daemon answered: %+v", sb)
	}
	// The lifetime ends while no daemon watches it.
	time.Sleep(7 * time.Second)
	d.start()
	waitFor(t, 60*time.Second, "the sandbox paused at its lifetime", func() bool {
		sb, err := d.client.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.State == "terminated" {
			t.Fatalf("the sandbox ended (%s) instead of pausing", sb.EndReason)
		}
		return sb.State == "paused"
	})
	req, err := http.NewRequest("POST", "http://"+d.addr+"/e2b/v2/sandboxes/"+id+"/connect", bytes.NewReader([]byte(`{"timeout":120}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", "e2b_"+d.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(b), `"sandboxID":"`+id+`"`) {
		t.Fatalf("connect to the paused sandbox: %d %s", resp.StatusCode, b)
	}
	if out := d.mustCLI("exec", id, "--", "cat", "/root/kept"); strings.TrimSpace(out) != "kept" {
		t.Errorf("after the resume /root/kept reads %q", out)
	}
	if events := d.mustCLI("events", id); !strings.Contains(events, "paused") || strings.Contains(events, "not recoverable") {
		t.Errorf("events:\n%s", events)
	}
	d.mustCLI("rm", id)
}
