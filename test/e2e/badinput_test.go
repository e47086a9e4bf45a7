package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// Bad input gets a 4xx JSON error naming the problem; the daemon keeps serving.
func TestBadInput(t *testing.T) {
	d := startDaemon(t)
	id := d.create()
	tok := d.token
	tests := []struct {
		name, method, path, token, body string
		status                          int
		mention                         string
	}{
		{"unknown runtime", "POST", "/v1/sandboxes", tok, `{"runtime":"docker"}`, 400, "runtime"},
		{"vm not yet", "POST", "/v1/sandboxes", tok, `{"runtime":"vm"}`, 400, "not supported"},
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
