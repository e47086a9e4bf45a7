// Package corral is the Go client of Corral's HTTP API (/v1). The CLI uses
// it; so can any Go program driving sandboxes.
//
//	c, _ := corral.FromEnv()
//	sb, _ := c.Create(ctx, apiv1.CreateSandboxRequest{})
//	res, _ := c.Run(ctx, sb.ID, apiv1.ExecRequest{Cmd: []string{"echo", "hi"}}, nil, os.Stdout, os.Stderr)
package corral

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"corral/pkg/apiv1"
)

// DefaultURL is where the daemon listens unless told otherwise.
const DefaultURL = "http://127.0.0.1:7070"

// DefaultTokenFile is where the daemon writes its token by default.
const DefaultTokenFile = "/var/lib/corral/token"

// Client talks to one Corral daemon.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// New returns a client for baseURL with token.
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{}}
}

// FromEnv configures a client from CORRAL_URL and CORRAL_TOKEN, falling
// back to DefaultURL and the token file (CORRAL_TOKEN_FILE or
// DefaultTokenFile).
func FromEnv() (*Client, error) {
	u := os.Getenv("CORRAL_URL")
	if u == "" {
		u = DefaultURL
	}
	tok := os.Getenv("CORRAL_TOKEN")
	if tok == "" {
		path := os.Getenv("CORRAL_TOKEN_FILE")
		if path == "" {
			path = DefaultTokenFile
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("no CORRAL_TOKEN set and cannot read the token file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	return New(u, tok), nil
}

// Error is an API error response.
type Error struct {
	Status  int
	Code    string
	Message string
	// RequestID is the daemon's id of the request (the X-Request-Id
	// answer header), which its log lines about the request carry.
	RequestID string
}

func (e *Error) Error() string { return e.Message }

// NotFound reports whether err is an API not_found error.
func NotFound(err error) bool {
	ae, ok := err.(*Error)
	return ok && ae.Code == "not_found"
}

func (c *Client) url(path string, q url.Values) string {
	u := c.BaseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// do sends a request and returns the response if it is 2xx; otherwise the
// decoded *Error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling corral at %s: %w", c.BaseURL, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e apiv1.Error
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
		return nil, &Error{Status: resp.StatusCode, Code: "internal", Message: fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(b)),
			RequestID: resp.Header.Get("X-Request-Id")}
	}
	return nil, &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message, RequestID: e.Error.RequestID}
}

// call sends in as JSON (if not nil) and decodes the response into out (if
// not nil).
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	resp, err := c.do(ctx, method, path, q, body, ctype)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func sbPath(id string, rest ...string) string {
	return "/v1/sandboxes/" + url.PathEscape(id) + strings.Join(rest, "")
}
