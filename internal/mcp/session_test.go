package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSessionTags: over streamable HTTP each MCP session's creates carry
// their own mcp tag, not its session id, and the bearer token reaches the
// handler only as the API's. The API end is a recorder of create bodies:
// what is under test is what the tools send.
func TestSessionTags(t *testing.T) {
	var mu sync.Mutex
	var tags []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req apiv1.CreateSandboxRequest
		if r.Method != "POST" || r.URL.Path != "/v1/sandboxes" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"message":"unexpected"}}`, http.StatusBadRequest)
			return
		}
		mu.Lock()
		tags = append(tags, req.Tags[TagKey])
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(apiv1.Sandbox{ID: "sb", State: "running", Tags: req.Tags})
	}))
	defer api.Close()
	srv := httptest.NewServer(HTTPHandler(corral.New(api.URL, "tok"), Options{}, "tok"))
	defer srv.Close()
	ctx := context.Background()
	ids := map[string]bool{}
	for range 2 {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{"tok"}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[cs.ID()] = true
		for range 2 {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_sandbox", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("create: %v %+v", err, res)
			}
		}
		cs.Close()
	}
	if len(tags) != 4 || tags[0] == "" || tags[0] != tags[1] || tags[2] != tags[3] || tags[0] == tags[2] {
		t.Fatalf("tags of two sessions' two creates each: %q", tags)
	}
	for _, tag := range tags {
		if ids[tag] {
			t.Fatalf("a tag is the session id %q", tag)
		}
	}
}

// bearer adds an Authorization header to each request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
