package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"corral/internal/testwait"
	"corral/internal/websession"
	"corral/pkg/apiv1"
)

// consoleEnv is the API with console sessions on, and one signed-in
// browser's cookies.
func consoleEnv(t *testing.T) (e *apiEnv, srv *httptest.Server, cookies string, csrf string) {
	t.Helper()
	e = newAPIEnv(t)
	st := websession.New(testToken)
	s := New(e.m, nil, testToken, "test", slog.New(slog.DiscardHandler))
	s.AcceptSessions(st)
	srv = httptest.NewServer(s)
	t.Cleanup(srv.Close)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", srv.URL+"/console/login", nil)
	r.Header.Set("Origin", srv.URL)
	if err := st.Login(w, r, testToken); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, c := range w.Result().Cookies() {
		parts = append(parts, c.Name+"="+c.Value)
		if c.Name == websession.CSRFCookie {
			csrf = c.Value
		}
	}
	return e, srv, strings.Join(parts, "; "), csrf
}

func TestAPISessionCookie(t *testing.T) {
	e, srv, cookies, csrf := consoleEnv(t)
	sb := e.create(apiv1.CreateSandboxRequest{})
	do := func(method, path string, hdr map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name, method, path string
		hdr                map[string]string
		want               int
	}{
		{"no credentials", "GET", "/v1/sandboxes", nil, 401},
		{"cookie", "GET", "/v1/sandboxes/" + sb.ID, map[string]string{"Cookie": cookies}, 200},
		{"a wrong bearer token beside the cookie", "GET", "/v1/sandboxes", map[string]string{"Cookie": cookies, "Authorization": "Bearer nope"}, 401},
		{"a forged session", "GET", "/v1/sandboxes", map[string]string{"Cookie": websession.CookieName + "=forged"}, 401},
		{"change without CSRF", "POST", "/v1/sandboxes/" + sb.ID + "/pause", map[string]string{"Cookie": cookies, "Origin": srv.URL}, 403},
		{"change from another origin", "POST", "/v1/sandboxes/" + sb.ID + "/pause", map[string]string{"Cookie": cookies, "Origin": "http://evil.test", websession.CSRFHeader: csrf}, 403},
		{"change", "DELETE", "/v1/sandboxes/" + sb.ID, map[string]string{"Cookie": cookies, "Origin": srv.URL, websession.CSRFHeader: csrf}, 200},
	} {
		if got := do(c.method, c.path, c.hdr); got != c.want {
			t.Errorf("%s: %s %s = %d, want %d", c.name, c.method, c.path, got, c.want)
		}
	}
}

func TestAPIPTY(t *testing.T) {
	e, srv, cookies, _ := consoleEnv(t)
	sb := e.create(apiv1.CreateSandboxRequest{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/sandboxes/" + sb.ID + "/pty?cmd=/bin/sh&cols=90&rows=20"
	if _, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {cookies}, "Origin": {"http://evil.test"}}}); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("a cookie WebSocket from another origin: %v %v", resp, err)
	}
	if _, resp, err := websocket.Dial(ctx, strings.Replace(u, "rows=20", "rows=5000", 1), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}}); err == nil || resp == nil || resp.StatusCode != 400 {
		t.Errorf("5000 rows: %v %v", resp, err)
	}
	if _, resp, err := websocket.Dial(ctx, strings.Replace(u, "cmd=/bin/sh", "cmd=/no/such/shell", 1), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}}); err == nil || resp == nil || resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Errorf("a command that does not exist: %v %v", resp, err)
	}
	for name, hdr := range map[string]http.Header{
		"bearer": {"Authorization": {"Bearer " + testToken}},
		"cookie": {"Cookie": {cookies}, "Origin": {srv.URL}},
	} {
		t.Run(name, func(t *testing.T) {
			c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: hdr})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","cols":101,"rows":33}`)); err != nil {
				t.Fatal(err)
			}
			if err := c.Write(ctx, websocket.MessageBinary, []byte("echo pty-$((6*7)); stty size; exit 3\n")); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			for {
				typ, b, err := c.Read(ctx)
				if err != nil {
					t.Fatalf("read (so far %q): %v", out.String(), err)
				}
				if typ == websocket.MessageBinary {
					out.Write(b)
					continue
				}
				if !strings.Contains(string(b), `"exit_code":3`) {
					t.Errorf("end message %s", b)
				}
				break
			}
			if !strings.Contains(out.String(), "pty-42") || !strings.Contains(out.String(), "33 101") {
				t.Errorf("terminal output %q: want pty-42 and 33 101", out.String())
			}
		})
	}
	// The process goes with its socket.
	sl, _, err := websocket.Dial(ctx, strings.Replace(u, "cmd=/bin/sh", "cmd=sleep&cmd=1000", 1), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := e.c.Processes(ctx, sb.ID); err != nil || len(ps) != 1 || ps[0].Cmd[0] != "sleep" {
		t.Fatalf("processes with the socket open: %+v %v", ps, err)
	}
	sl.CloseNow()
	testwait.For(t, 10*time.Second, "the closed terminal's process to end", func() bool {
		ps, err := e.c.Processes(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(ps) == 0
	})
	// A text frame that is not a resize ends the session, saying why.
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"shout"}`)); err != nil {
		t.Fatal(err)
	}
	for {
		if _, _, err = c.Read(ctx); err != nil {
			break
		}
	}
	if websocket.CloseStatus(err) != websocket.StatusUnsupportedData {
		t.Errorf("after a bad text frame: %v", err)
	}
}
