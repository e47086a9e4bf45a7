package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"corral/internal/reqid"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// lockedBuffer is a log sink the server's goroutines share with the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An API error names its request's id, the one in the X-Request-Id header
// (the caller's own when sane), and the log line about the request
// carries it.
func TestAPIErrorRequestID(t *testing.T) {
	e := newAPIEnv(t)
	var logs lockedBuffer
	log := slog.New(reqid.NewHandler(slog.NewJSONHandler(&logs, nil)))
	srv := httptest.NewServer(reqid.Middleware(New(e.m, nil, testToken, "test", log), log))
	defer srv.Close()
	for _, c := range []struct {
		name, callerID, token string
		status                int
	}{
		{"not found", "", testToken, http.StatusNotFound},
		{"the caller's id", "trace-42", testToken, http.StatusNotFound},
		{"no token", "", "", http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/sb-doesnotexist0", nil)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			if c.callerID != "" {
				req.Header.Set(reqid.Header, c.callerID)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body apiv1.Error
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			id := resp.Header.Get(reqid.Header)
			if resp.StatusCode != c.status || id == "" || body.Error.RequestID != id || body.Error.Code == "" {
				t.Fatalf("status %d, header %q, body %+v", resp.StatusCode, id, body)
			}
			if c.callerID != "" && id != c.callerID {
				t.Errorf("the caller's id %q became %q", c.callerID, id)
			}
			if !logged(logs.String(), id, c.status) {
				t.Errorf("no log line with request_id %q and status %d:\n%s", id, c.status, logs.String())
			}
		})
	}
	// The Go SDK hands the id to its caller.
	_, err := corral.New(srv.URL, testToken).Get(context.Background(), "sb-doesnotexist0")
	var ae *corral.Error
	if !errors.As(err, &ae) || ae.RequestID == "" || !strings.Contains(logs.String(), ae.RequestID) {
		t.Errorf("the SDK's error %#v: no request id found in the log", err)
	}
	// Served in process (no middleware), an error has no request_id field.
	code, body := e.raw("GET", "/v1/sandboxes/sb-doesnotexist0", "")
	if code != http.StatusNotFound || strings.Contains(body, "request_id") {
		t.Errorf("without the middleware: %d %s", code, body)
	}
}

// logged reports whether a JSON log line has request_id id and status.
func logged(logs, id string, status int) bool {
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m[reqid.Key] == id && m["status"] == float64(status) {
			return true
		}
	}
	return false
}
