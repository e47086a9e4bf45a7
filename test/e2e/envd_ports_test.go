package e2e

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestEnvdOtherPortsAndFullDisk: a port other than envd's goes to the
// sandbox's exposed port with the access token; an upload that fills the
// sandbox's disk is 507 in envd's shape.
func TestEnvdOtherPortsAndFullDisk(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create("--timeout", "10m", "--expose", "8000", "--disk", "0.25")
	token := accessToken(t, d, id)
	d.mustCLI("exec", id, "--", "sh", "-c", "mkdir -p /srv && echo served > /srv/hello.txt")
	d.mustCLI("exec", "-d", id, "--", "python3", "-m", "http.server", "8000", "--directory", "/srv")
	get := func(tok string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.flag("--envd-listen")+"/hello.txt", nil)
		req.Host = "8000-" + id + ".corral.test"
		if tok != "" {
			req.Header.Set("X-Access-Token", tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var status int
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if status, body = get(token); status == http.StatusOK {
			break
		}
	}
	if status != http.StatusOK || body != "served\n" {
		t.Fatalf("port 8000 through the envd listener: %d %q", status, body)
	}
	status, b := get("")
	envdErrorBody(t, "port 8000 without a token", status, []byte(b), http.StatusUnauthorized, "")

	// 512 MiB into a 256 MiB disk.
	c := newEnvd(t, d, id, token, false)
	status, raw := c.do(t, http.MethodPost, url.Values{"path": {"/root/fill.bin"}}, "application/octet-stream", "", io.LimitReader(zeros{}, 512<<20), nil)
	envdErrorBody(t, "a disk-filling upload", status, raw, http.StatusInsufficientStorage, "")
	if out := d.mustCLI("exec", id, "--", "sh", "-c", "ls -a /root"); strings.Contains(out, "fill.bin") || strings.Contains(out, ".corral-upload") {
		t.Errorf("a failed upload left %q", out)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
