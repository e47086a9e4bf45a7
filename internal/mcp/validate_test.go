package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCreateRequestValidation(t *testing.T) {
	tl := &tools{session: "s1", maxTimeout: time.Hour}
	bad := map[string]CreateInput{
		"runtime":        {Runtime: "docker"},
		"negative":       {Timeout: -1},
		"over max":       {Timeout: 3601},
		"block and list": {BlockNetwork: true, DomainAllowlist: []string{"pypi.org"}},
		"mcp tag":        {Tags: map[string]string{TagKey: "other"}},
	}
	for name, in := range bad {
		if _, err := tl.createRequest(in, "s1"); err == nil {
			t.Errorf("%s: accepted %+v", name, in)
		}
	}
	req, err := tl.createRequest(CreateInput{Runtime: "vm", Tags: map[string]string{"a": "b"}, CIDRAllowlist: []string{"10.0.0.0/8"}}, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if req.Tags[TagKey] != "s1" || req.Tags["a"] != "b" || req.Timeout != defaultTimeout.Seconds() || req.CIDRAllowlist[0] != "10.0.0.0/8" {
		t.Errorf("request %+v", req)
	}
	req, err = tl.createRequest(CreateInput{Volumes: []VolumeInput{{Name: "data", Path: "/data", ReadOnly: true}}, Secrets: []string{"api"},
		SecretHeaders: []HeaderInput{{Secret: "api", Key: "TOKEN", Host: "api.example.com", Header: "Authorization", Template: "Bearer {value}"}}}, "s1")
	if err != nil || len(req.Volumes) != 1 || req.Volumes[0] != (apiv1.VolumeMount{Name: "data", Path: "/data", ReadOnly: true}) ||
		len(req.Secrets) != 1 || len(req.SecretHeaders) != 1 || req.SecretHeaders[0].Template != "Bearer {value}" {
		t.Errorf("volumes and secrets: request %+v, %v", req, err)
	}
	short := &tools{session: "s1", maxTimeout: time.Minute}
	if req, _ := short.createRequest(CreateInput{}, "s1"); req.Timeout != 60 {
		t.Errorf("default timeout %v over a 1m max", req.Timeout)
	}
}

func TestExecRequestValidation(t *testing.T) {
	bad := map[string]RunInput{
		"no sandbox": {Command: "true"},
		"no command": {Sandbox: "x"},
		"both":       {Sandbox: "x", Command: "true", Argv: []string{"true"}},
		"empty argv": {Sandbox: "x", Argv: []string{""}},
		"negative":   {Sandbox: "x", Command: "true", Timeout: -2},
		"too long":   {Sandbox: "x", Command: "true", Timeout: 7200},
	}
	for name, in := range bad {
		if _, err := execRequest(in); err == nil {
			t.Errorf("%s: accepted %+v", name, in)
		}
	}
	req, err := execRequest(RunInput{Sandbox: "x", Command: "echo hi"})
	if err != nil || strings.Join(req.Cmd, " ") != "/bin/sh -c echo hi" || req.Timeout != 60 {
		t.Errorf("request %+v, %v", req, err)
	}
}

func TestWriteContentValidation(t *testing.T) {
	bad := map[string]WriteInput{
		"no path":  {Sandbox: "x"},
		"encoding": {Sandbox: "x", Path: "/a", Encoding: "hex"},
		"base64":   {Sandbox: "x", Path: "/a", Encoding: "base64", Content: "!!"},
		"mode":     {Sandbox: "x", Path: "/a", Mode: "rwx"},
		"mode 8":   {Sandbox: "x", Path: "/a", Mode: "789"},
		"too big":  {Sandbox: "x", Path: "/a", Content: strings.Repeat("a", WriteLimit+1)},
	}
	for name, in := range bad {
		if _, _, err := writeContent(in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	data, mode, err := writeContent(WriteInput{Sandbox: "x", Path: "/a", Encoding: "base64", Content: "aGk=", Mode: "0755"})
	if err != nil || string(data) != "hi" || mode != 0o755 {
		t.Errorf("got %q %o %v", data, mode, err)
	}
}

func TestCapWriter(t *testing.T) {
	w := &capWriter{max: 4}
	_, _ = w.Write([]byte("ab"))
	_, _ = w.Write([]byte("c\xc3\xa9def")) // é split by the cut
	if !w.cut() || w.total != 8 {
		t.Fatalf("cut %v total %d", w.cut(), w.total)
	}
	if got := w.text(); !strings.HasPrefix(got, "abc\n[output cut: 4 of 8 bytes shown]") {
		t.Errorf("text %q", got)
	}
	whole := &capWriter{max: 4}
	_, _ = whole.Write([]byte("abcd"))
	if whole.cut() || whole.text() != "abcd" {
		t.Errorf("uncut text %q", whole.text())
	}
}

// TestToolErrors: bad arguments come back over MCP as tool errors
// (isError with the reason), and the session carries on.
func TestToolErrors(t *testing.T) {
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	srv := New(corral.New("http://127.0.0.1:1", "t"), Options{MaxTimeout: time.Minute})
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"create_sandbox", map[string]any{"timeout": 120}, "at most 60s"},
		{"run_command", map[string]any{"sandbox": "x"}, "command or argv"},
		{"run_command", map[string]any{"sandbox": 5, "command": "true"}, "sandbox"},
		{"snapshot", map[string]any{"sandbox": "x", "kind": "disk"}, "kind"},
		{"list_sandboxes", map[string]any{}, "127.0.0.1:1"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || !strings.Contains(text, c.want) {
			t.Errorf("%s %v: isError %v %q, want an error with %q", c.tool, c.args, res.IsError, text, c.want)
		}
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 11 {
		t.Errorf("%d tools, %v", len(tools.Tools), err)
	}
}

func TestHTTPHandlerToken(t *testing.T) {
	srv := httptest.NewServer(HTTPHandler(corral.New("http://127.0.0.1:1", "t"), Options{}, "secret"))
	defer srv.Close()
	for _, auth := range []string{"", "Bearer wrong", "secret", "Basic c2VjcmV0"} {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, resp.StatusCode)
		}
	}
	ok, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	ok.Header.Set("Authorization", "Bearer secret")
	ok.Header.Set("Content-Type", "application/json")
	ok.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(ok)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the right token: %d, want 200", resp.StatusCode)
	}
	if bearerOK(&http.Request{Header: http.Header{"Authorization": {"Bearer secret"}}}, "") {
		t.Error("an empty token admitted a request")
	}
}
