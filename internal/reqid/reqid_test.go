package reqid

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSane(t *testing.T) {
	for _, c := range []struct {
		id   string
		want bool
	}{
		{"abc-123_X.y:z", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"a b", false},
		{"a\nlevel=ERROR", false},
		{`a"b`, false},
		{"ü", false},
	} {
		if got := Sane(c.id); got != c.want {
			t.Errorf("Sane(%q) = %v", c.id, got)
		}
	}
}

// logLines decodes JSON log lines.
func logLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestMiddleware(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	h := Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if FromContext(r.Context()) != FromResponse(w) {
			t.Errorf("context %q, response header %q", FromContext(r.Context()), FromResponse(w))
		}
		log.InfoContext(r.Context(), "inside", "sandbox", "sb-x")
		if r.URL.Path == "/bad" {
			http.Error(w, "no", http.StatusBadRequest)
		}
	}), log)
	for _, c := range []struct {
		path, in string
		keep     bool
	}{
		{"/bad", "caller-id-1", true},
		{"/ok", "", false},
		{"/bad", "evil\"id with spaces", false},
	} {
		buf.Reset()
		req := httptest.NewRequest("GET", c.path, nil)
		if c.in != "" {
			req.Header.Set(Header, c.in)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		id := rec.Header().Get(Header)
		if !Sane(id) || (id == c.in) != c.keep {
			t.Errorf("%s with %q: id %q", c.path, c.in, id)
		}
		lines := logLines(t, &buf)
		// The handler's line, and the request's own line for an error
		// (a success's is at debug).
		want := 1
		if c.path == "/bad" {
			want = 2
		}
		if len(lines) != want {
			t.Fatalf("%s: %d log lines: %v", c.path, len(lines), lines)
		}
		for _, l := range lines {
			if l[Key] != id {
				t.Errorf("log line %v lacks request_id %q", l, id)
			}
		}
		if want == 2 && (lines[1]["status"] != float64(400) || lines[1]["msg"] != "request") {
			t.Errorf("request line: %v", lines[1])
		}
	}
}

// A log line without a request's context has no request_id.
func TestHandlerWithoutRequest(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil))).With("op", "x")
	log.Info("background")
	if l := logLines(t, &buf)[0]; l[Key] != nil || l["op"] != "x" {
		t.Errorf("line %v", l)
	}
}
