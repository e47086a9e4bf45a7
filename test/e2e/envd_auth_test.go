package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"corral/internal/e2b/envd/gen/process"
)

// sdkSignature signs a /files URL as the e2b SDK's getSignature does.
func sdkSignature(path, op, user, token string, exp int64) string {
	raw := fmt.Sprintf("%s:%s:%s:%s", path, op, user, token)
	if exp != 0 {
		raw += fmt.Sprintf(":%d", exp)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

// envdErrorBody checks an answer is envd's error shape with status and
// (when not "") exactly msg.
func envdErrorBody(t *testing.T, what string, status int, body []byte, wantStatus int, msg string) {
	t.Helper()
	var e struct {
		Code    int     `json:"code"`
		Message *string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil || status != wantStatus || e.Code != wantStatus || e.Message == nil || msg != "" && *e.Message != msg {
		t.Errorf("%s: %d %s, want %d {code, message %q}", what, status, body, wantStatus, msg)
	}
}

func TestEnvdAuthAndBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := d.create("--timeout", "10m")
	token := accessToken(t, d, id)
	c := newEnvd(t, d, id, token, true)
	if status, body := c.do(t, http.MethodPost, url.Values{"path": {"/root/s.txt"}}, "application/octet-stream", "", strings.NewReader("signed"), nil); status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, body)
	}

	// No token, a wrong token: 401 in envd's shape, for RPCs and /files.
	none, wrong := newEnvd(t, d, id, "", true), newEnvd(t, d, id, "nope", true)
	status, body := none.do(t, http.MethodGet, url.Values{"path": {"/root/s.txt"}}, "", "", nil, nil)
	envdErrorBody(t, "no token", status, body, http.StatusUnauthorized, "missing access token or file signature")
	status, body = wrong.do(t, http.MethodGet, url.Values{"path": {"/root/s.txt"}}, "", "", nil, nil)
	envdErrorBody(t, "a wrong token", status, body, http.StatusUnauthorized, "invalid access token")
	if _, err := none.proc.List(ctx, connect.NewRequest(&process.ListRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("List without a token: %v", err)
	}
	// Another sandbox's token opens nothing here.
	other := d.create("--timeout", "10m")
	status, body = newEnvd(t, d, id, accessToken(t, d, other), true).do(t, http.MethodGet, url.Values{"path": {"/root/s.txt"}}, "", "", nil, nil)
	envdErrorBody(t, "another sandbox's token", status, body, http.StatusUnauthorized, "invalid access token")

	// Signed URLs: good, expired (the SDK's exact body), forged, for the
	// wrong operation.
	future, past := time.Now().Add(time.Minute).Unix(), time.Now().Add(-10*time.Second).Unix()
	signed := func(path, op string, exp int64, sig string) url.Values {
		if sig == "" {
			sig = sdkSignature(path, op, "", token, exp)
		}
		q := url.Values{"path": {path}, "signature": {sig}}
		if exp != 0 {
			q.Set("signature_expiration", fmt.Sprint(exp))
		}
		return q
	}
	if status, body = none.do(t, http.MethodGet, signed("/root/s.txt", "read", future, ""), "", "", nil, nil); status != http.StatusOK || string(body) != "signed" {
		t.Errorf("a signed download: %d %s", status, body)
	}
	// Without expiry, or too far ahead: refused (issue 25), though E2B's
	// envd takes both.
	status, body = none.do(t, http.MethodGet, signed("/root/s.txt", "read", 0, ""), "", "", nil, nil)
	if status != http.StatusUnauthorized || !strings.Contains(string(body), "signature_expiration is required") {
		t.Errorf("a signed download without expiry: %d %s", status, body)
	}
	tooFar := time.Now().Add(8 * 24 * time.Hour).Unix()
	status, body = none.do(t, http.MethodGet, signed("/root/s.txt", "read", tooFar, ""), "", "", nil, nil)
	envdErrorBody(t, "a signature 8 days ahead", status, body, http.StatusUnauthorized, "signature_expiration is more than 7 days ahead")
	if status, body = none.do(t, http.MethodPost, signed("/root/up.txt", "write", future, ""), "application/octet-stream", "", strings.NewReader("w"), nil); status != http.StatusOK {
		t.Errorf("a signed upload: %d %s", status, body)
	}
	status, body = none.do(t, http.MethodGet, signed("/root/s.txt", "read", past, ""), "", "", nil, nil)
	if status != http.StatusUnauthorized || strings.TrimSpace(string(body)) != `{"code":401,"message":"signature is already expired"}` {
		t.Errorf("an expired signature: %d %s", status, body)
	}
	status, body = none.do(t, http.MethodGet, signed("/root/s.txt", "read", past, "v1_forged"), "", "", nil, nil)
	envdErrorBody(t, "a forged expired signature", status, body, http.StatusUnauthorized, "invalid signature")
	status, body = none.do(t, http.MethodPost, signed("/root/s.txt", "read", future, ""), "application/octet-stream", "", strings.NewReader("x"), nil)
	envdErrorBody(t, "a read signature used to write", status, body, http.StatusUnauthorized, "invalid signature")
	q := signed("/root/s.txt", "read", future, "")
	q.Set("path", "/etc/shadow")
	status, body = none.do(t, http.MethodGet, q, "", "", nil, nil)
	envdErrorBody(t, "a signature for another path", status, body, http.StatusUnauthorized, "invalid signature")

	// Bad bodies: a gzip bomb, bytes that are not gzip, a bad content type,
	// no path, a missing file: 4xx in envd's shape, and nothing written.
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for range 2048 { // 2 GiB of zeros in about 2 MiB
		zw.Write(zero)
	}
	zw.Close()
	t0 := time.Now()
	status, body = c.do(t, http.MethodPost, url.Values{"path": {"/root/bomb"}}, "application/octet-stream", "gzip", bytes.NewReader(bomb.Bytes()), nil)
	envdErrorBody(t, "a gzip bomb", status, body, http.StatusBadRequest, "")
	t.Logf("a %d-byte gzip bomb refused in %s", bomb.Len(), time.Since(t0))
	if out, _, code := d.cli("", "exec", id, "--", "sh", "-c", "ls -a /root; du -sk /root"); code != 0 || strings.Contains(out, "bomb") {
		t.Errorf("the bomb left something: %s", out)
	}
	status, body = c.do(t, http.MethodPost, url.Values{"path": {"/root/x"}}, "application/octet-stream", "gzip", strings.NewReader("not gzip"), nil)
	envdErrorBody(t, "not gzip", status, body, http.StatusBadRequest, "")
	status, body = c.do(t, http.MethodPost, url.Values{"path": {"/root/x"}}, "text/plain", "", strings.NewReader("x"), nil)
	envdErrorBody(t, "a text/plain upload", status, body, http.StatusBadRequest, "")
	status, body = c.do(t, http.MethodPost, url.Values{}, "application/octet-stream", "", strings.NewReader("x"), nil)
	envdErrorBody(t, "an octet-stream upload without a path", status, body, http.StatusBadRequest, "")
	status, body = c.do(t, http.MethodGet, url.Values{"path": {"/no/such/file"}}, "", "", nil, nil)
	envdErrorBody(t, "a missing file", status, body, http.StatusNotFound, "")
	status, body = c.do(t, http.MethodGet, url.Values{"path": {"/root"}}, "", "", nil, nil)
	envdErrorBody(t, "a directory", status, body, http.StatusBadRequest, "")

	testEnvdRouting(t, d, id, token)
}

// testEnvdRouting: the Host form routes like the headers; an unknown
// sandbox is 502 (the SDK's "sandbox gone"), a bad port 400.
func testEnvdRouting(t *testing.T, d *daemon, id, token string) {
	get := func(host string, hdr map[string]string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.flag("--envd-listen")+"/health", nil)
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if status, body := get("49983-"+id+".corral.test", nil); status != http.StatusNoContent {
		t.Errorf("/health by Host: %d %s", status, body)
	}
	status, body := get("localhost", map[string]string{"E2b-Sandbox-Id": "sb-nosuchsandbox", "E2b-Sandbox-Port": "49983"})
	envdErrorBody(t, "an unknown sandbox", status, body, http.StatusBadGateway, "")
	status, body = get("localhost", map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "99999"})
	envdErrorBody(t, "a bad port", status, body, http.StatusBadRequest, "")
	status, body = get("localhost", nil)
	envdErrorBody(t, "no sandbox named", status, body, http.StatusBadRequest, "")
	// Another port goes to the sandbox's port: not exposed here, so 404.
	status, body = get("localhost", map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "8080", "X-Access-Token": token})
	envdErrorBody(t, "an unexposed port", status, body, http.StatusNotFound, "")
}
