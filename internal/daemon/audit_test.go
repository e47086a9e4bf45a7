package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"corral/internal/audit"
	"corral/internal/records"
	"corral/internal/seal"
)

// The E2B control API's changing calls are recorded by the holder of the
// token its key carries, the same caller as on the native API; its reads
// are not; the envd face's requests carry their caller to the manager.
func TestE2BAudited(t *testing.T) {
	ctx := context.Background()
	st, err := records.Open(ctx, filepath.Join(t.TempDir(), "corral.db"), seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tr, err := audit.Open(ctx, audit.Config{Store: st, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	h := e2bAudited(tr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for _, method := range []string{"GET", "POST"} {
		req := httptest.NewRequest(method, "/e2b/sandboxes/sb-abc/pause", nil)
		req.Header.Set("X-API-KEY", "e2b_tok")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	es, err := tr.Query(ctx, audit.Filter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 {
		t.Fatalf("entries: %+v", es)
	}
	e := es[0]
	if e.Kind != "api" || e.SandboxID != "sb-abc" || e.Caller != audit.TokenCaller("tok") || e.Fields["face"] != "e2b" ||
		e.Fields["status"] != "204" || e.Fields["method"] != "POST" {
		t.Fatalf("entry: %+v", e)
	}

	var got string
	envd := envdAudited(tr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = audit.CallerFrom(r.Context()) }))
	req := httptest.NewRequest("POST", "/process.Process/Start", nil)
	req.Header.Set("X-Access-Token", "acc")
	envd.ServeHTTP(httptest.NewRecorder(), req)
	if got != "envd:"+audit.TokenCaller("acc") {
		t.Fatalf("envd caller %q", got)
	}
}
