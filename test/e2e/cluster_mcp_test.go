package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkClusterMCP drives a control plane's /mcp with the MCP SDK's client:
// a sandbox created there is placed on a node, runs a command and is
// terminated; a wrong token is refused.
func checkClusterMCP(ctx context.Context, t *testing.T, c *controlPlane, token string) {
	t.Helper()
	connect := func(tok string) (*mcp.ClientSession, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: "http://" + c.addr + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{tok}}}
		return mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, tr, nil)
	}
	if cs, err := connect("wrong"); err == nil {
		cs.Close()
		t.Error("a control plane's /mcp took a wrong token")
	}
	cs, err := connect(token)
	if err != nil {
		t.Fatalf("connecting to a control plane's /mcp: %v", err)
	}
	defer cs.Close()
	call := func(tool string, args map[string]any, out any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("MCP %s through a control plane: %v %+v", tool, err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("MCP %s's result %s: %v", tool, b, err)
		}
	}
	var sb struct{ ID string }
	call("create_sandbox", map[string]any{"timeout": 120}, &sb)
	if _, err := c.client.Get(ctx, sb.ID); err != nil {
		t.Fatalf("the sandbox /mcp created (%q) is not placed: %v", sb.ID, err)
	}
	var run struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	call("run_command", map[string]any{"sandbox": sb.ID, "command": "echo $((6*7))"}, &run)
	if run.ExitCode != 0 || run.Stdout != "42\n" {
		t.Errorf("run_command through a control plane's /mcp: %+v", run)
	}
	var done any
	call("terminate", map[string]any{"sandbox": sb.ID}, &done)
}

// bearerTransport adds the bearer token to each request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
