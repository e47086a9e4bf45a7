package agent

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/agentapi"
)

// FuzzStartRequest feeds arbitrary bodies through the start request's
// decoding and validation: no panic, and whatever passes is well formed.
func FuzzStartRequest(f *testing.F) {
	seeds := []string{
		`{"args":["python3","-c","print(1)"],"env":{"K":"V"},"cwd":"/root","user":"root","stdin":true,"pty":{"cols":80,"rows":24},"timeout_ms":0,"tag":"","log":false}`,
		`{"args":[]}`, `{"args":["a\u0000b"]}`, `{"env":{"=":""}}`, `{"timeout_ms":-1}`,
		`{"timeout_ms":9223372036854775807}`, `{"pty":{"cols":0}}`, `null`, `[]`, `{`,
		`{"args":["x"]} trailing`, `{"user":"65534:65534"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/process/start", bytes.NewReader(body))
		w := httptest.NewRecorder()
		var req agentapi.StartRequest
		if decodeJSON(w, r, &req) != nil {
			return
		}
		if validateStart(&req) != nil {
			return
		}
		if len(req.Args) == 0 || req.Args[0] == "" || req.TimeoutMS < 0 {
			t.Fatalf("invalid request accepted: %+v", req)
		}
		for k := range req.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				t.Fatalf("bad env key %q accepted", k)
			}
		}
	})
}

// FuzzFilePath checks the file API's path handling end to end, without the
// network: whatever the path and user home, the host path stays in the root.
func FuzzFilePath(f *testing.F) {
	for _, s := range []string{"../../../etc/x", "/toroot/etc", "a/../../b", "", "/", "//x//..//y", "up/up/up"} {
		f.Add(s, "/root")
	}
	f.Add("x", "../../..")
	root := f.TempDir()
	for link, target := range map[string]string{"toroot": "/", "up": "../../..", "self": "self"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			f.Fatal(err)
		}
	}
	s := &Server{root: root} // no New: it would start the reaper
	f.Fuzz(func(t *testing.T, p, home string) {
		sandbox, err := sandboxPath(p, home)
		if err != nil {
			return
		}
		for _, follow := range []bool{true, false} {
			host, err := s.resolve(sandbox, follow)
			if err != nil {
				continue
			}
			if host != root && !strings.HasPrefix(host, root+"/") {
				t.Fatalf("path %q home %q resolved to %q outside %q", p, home, host, root)
			}
		}
	})
}
