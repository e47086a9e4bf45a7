package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Bad input gets a 4xx JSON error naming the problem; the daemon keeps serving.
func TestBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create()
	tok := d.token
	tests := []struct {
		name, method, path, token, body string
		status                          int
		mention                         string
	}{
		{"unknown runtime", "POST", "/v1/sandboxes", tok, `{"runtime":"docker"}`, 400, "runtime"},
		{"negative memory", "POST", "/v1/sandboxes", tok, `{"memory_mb":-5}`, 400, "memory_mb"},
		{"memory as string", "POST", "/v1/sandboxes", tok, `{"memory_mb":"lots"}`, 400, "memory_mb"},
		{"timeout over 24h", "POST", "/v1/sandboxes", tok, `{"timeout":90000}`, 400, "timeout"},
		{"unknown field", "POST", "/v1/sandboxes", tok, `{"colour":"red"}`, 400, "colour"},
		{"malformed JSON", "POST", "/v1/sandboxes", tok, `{"timeout":`, 400, "JSON"},
		{"bad domain", "POST", "/v1/sandboxes", tok, `{"domain_allowlist":["exa mple.com"]}`, 400, "domain_allowlist"},
		{"bad cidr", "POST", "/v1/sandboxes", tok, `{"cidr_allowlist":["300.1.1.1/8"]}`, 400, "cidr_allowlist"},
		{"block with allowlist", "POST", "/v1/sandboxes", tok, `{"block_network":true,"cidr_allowlist":["198.51.100.0/24"]}`, 400, "block_network"},
		{"missing command", "POST", "/v1/sandboxes/" + id + "/processes", tok, `{"cmd":[]}`, 400, "cmd"},
		{"unknown sandbox", "GET", "/v1/sandboxes/sb-aaaaaaaaaaaaaaaa", tok, ``, 404, "sb-aaaaaaaaaaaaaaaa"},
		{"hostile sandbox id", "GET", "/v1/sandboxes/..%2f..%2fetc", tok, ``, 404, "sandbox"},
		{"missing token", "GET", "/v1/sandboxes", "", ``, 401, "token"},
		{"wrong token", "GET", "/v1/sandboxes", "not-the-token", ``, 401, "token"},
		{"bad signal", "POST", "/v1/sandboxes/" + id + "/processes/1/signal", tok, `{"signal":"SIGNOPE"}`, 400, "signal"},
		{"no path", "GET", "/v1/sandboxes/" + id + "/files", tok, ``, 400, "path"},
		{"bad mode", "PUT", "/v1/sandboxes/" + id + "/files?path=/x&mode=999", tok, `x`, 400, "mode"},
		{"build without a base", "POST", "/v1/images/build", tok, `{"spec":{"steps":[{"run":"true"}]}}`, 400, "base"},
		{"build step of two kinds", "POST", "/v1/images/build", tok, `{"spec":{"base":"debian:bookworm","steps":[{"run":"true","user":"x"}]}}`, 400, "steps[0]"},
		{"build apt option", "POST", "/v1/images/build", tok, `{"spec":{"base":"debian:bookworm","steps":[{"apt_install":["-oAPT::x=1"]}]}}`, 400, "steps[0].apt_install[0]"},
		{"layer escaping", "POST", "/v1/images/layers", tok, escapingTar(t), 400, "../../escape"},
		{"layer not a tar", "POST", "/v1/images/layers", tok, "definitely not a tar archive, but long enough to be read as one by a tar reader.....................................................................................................................................................................................................................................................................................................................................................................................................................................................................................", 400, "layer"},
		{"unknown layer", "GET", "/v1/images/layers/sha256:" + strings.Repeat("0", 64), tok, ``, 404, "sha256:0000"},
		{"fork of none", "POST", "/v1/sandboxes/" + id + "/fork", tok, `{"count":0}`, 400, "count"},
		{"fork too many", "POST", "/v1/sandboxes/" + id + "/fork", tok, `{"count":1000}`, 400, "count"},
		{"fork count as string", "POST", "/v1/sandboxes/" + id + "/fork", tok, `{"count":"five"}`, 400, "count"},
		{"fork of unknown", "POST", "/v1/sandboxes/sb-aaaaaaaaaaaaaaaa/fork", tok, `{"count":2}`, 404, "sb-aaaaaaaaaaaaaaaa"},
		{"snapshot bad name", "POST", "/v1/sandboxes/" + id + "/snapshots/memory", tok, `{"name":"a b"}`, 400, "name"},
		{"snapshot name like an id", "POST", "/v1/sandboxes/" + id + "/snapshots/memory", tok, `{"name":"snap-aaaaaaaaaaaaaaaa"}`, 400, "name"},
		{"from unknown snapshot", "POST", "/v1/sandboxes", tok, `{"from_snapshot":"snap-aaaaaaaaaaaaaaaa"}`, 404, "snap-aaaaaaaaaaaaaaaa"},
		{"from hostile snapshot", "POST", "/v1/sandboxes", tok, `{"from_snapshot":"../../etc"}`, 400, "from_snapshot"},
		{"hostile snapshot ref", "GET", "/v1/snapshots/..%2f..%2fetc", tok, ``, 404, "snapshot"},
		{"remove unknown snapshot", "DELETE", "/v1/snapshots/snap-aaaaaaaaaaaaaaaa", tok, ``, 404, "snap-aaaaaaaaaaaaaaaa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := d.api(tt.method, tt.path, tt.token, tt.body)
			if status != tt.status {
				t.Errorf("status %d, want %d: %s", status, tt.status, body)
			}
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == "" {
				t.Fatalf("not a JSON error body: %q", body)
			}
			if !strings.Contains(e.Error.Message, tt.mention) {
				t.Errorf("message %q does not name %q", e.Error.Message, tt.mention)
			}
		})
	}
	if out := d.mustCLI("exec", id, "--", "echo", "serving"); out != "serving\n" {
		t.Errorf("daemon after bad input: %q", out)
	}
}

// escapingTar is a layer whose one entry climbs out of the layer root.
func escapingTar(t *testing.T) string {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "../../escape", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("x"))
	tw.Close()
	return buf.String()
}
