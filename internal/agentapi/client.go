package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"corral/internal/errdefs"
)

// maxErrorBody bounds the error and JSON response bodies the client reads.
const maxErrorBody = 64 << 10

// maxResponseBody bounds a JSON response (a deep directory listing).
const maxResponseBody = 64 << 20

// Client is the daemon's connection to one agent. It is safe for concurrent
// use: every call is one HTTP/2 stream on the same connection.
type Client struct {
	cc           *http.ClientConn
	conn         *watchedConn
	version      int
	agentVersion string
	prefix       string
}

// NewClient speaks HTTP/2 with prior knowledge over conn, asks the agent
// which protocol versions it serves, and picks the highest one both sides
// support. The Client owns conn from now on, even when NewClient fails.
func NewClient(ctx context.Context, conn net.Conn) (*Client, error) {
	wc := newWatchedConn(conn)
	// The address dials nothing (newTransport's dial returns wc); it only
	// has to parse.
	cc, err := newTransport(wc).NewClientConn(ctx, "http", "agent:80")
	if err != nil {
		wc.Close()
		return nil, fmt.Errorf("%w: agent: starting http/2: %v", errdefs.ErrUnavailable, err)
	}
	c := &Client{cc: cc, conn: wc}
	if err := c.negotiate(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Flow control of the client's receive side. Every stream (a process's
// output, a file) gets a window of its own and the connection's window is
// the sum of all of them, so that a stream nobody reads can fill its own
// window but never the connection's: it cannot hold up any other call.
const (
	maxStreams       = 1000 // the agent's bound
	streamRecvWindow = 1 << 20
	connRecvWindow   = streamRecvWindow * maxStreams
)

// The connection's health check: after PingAfter without a frame from
// the agent the client sends an HTTP/2 PING, and drops the connection
// when no answer comes within PingTimeout, so a silenced agent (stopped,
// or a channel a guest process holds without speaking) is noticed within
// their sum even while calls wait on it. Every HTTP/2 peer answers PINGs:
// it asks nothing of the agent's protocol version. Variables for tests.
var (
	PingAfter   = 10 * time.Second
	PingTimeout = 10 * time.Second
)

// Bounds the agent sets too (docs/AGENT_PROTOCOL.md, "Transport").
const (
	maxFrameSize   = 256 << 10
	maxHeaderBytes = 64 << 10
)

// newTransport returns a transport whose one connection is conn: its
// NewClientConn speaks HTTP/2 with prior knowledge over conn, and any
// further dial fails.
func newTransport(conn net.Conn) *http.Transport {
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	var dialed sync.Once
	return &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			var c net.Conn
			dialed.Do(func() { c = conn })
			if c == nil {
				return nil, errors.New("the agent connection is already in use")
			}
			return c, nil
		},
		Protocols:              &h2c,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxReadFrameSize:              maxFrameSize,
			StrictMaxConcurrentRequests:   true,
			MaxReceiveBufferPerStream:     streamRecvWindow,
			MaxReceiveBufferPerConnection: connRecvWindow,
			SendPingTimeout:               PingAfter,
			PingTimeout:                   PingTimeout,
		},
	}
}

func (c *Client) negotiate(ctx context.Context) error {
	var info VersionInfo
	if err := c.callJSON(ctx, http.MethodGet, PathVersion, nil, nil, &info); err != nil {
		return fmt.Errorf("agent: negotiating version: %w", err)
	}
	best := 0
	for _, theirs := range info.Protocols {
		for _, ours := range SupportedVersions {
			if theirs == ours && ours > best {
				best = ours
			}
		}
	}
	if best == 0 {
		return fmt.Errorf("%w: agent %q speaks protocols %v, we speak %v",
			errdefs.ErrNotSupported, info.Agent, info.Protocols, SupportedVersions)
	}
	c.version = best
	c.agentVersion = info.Agent
	c.prefix = "/v" + strconv.Itoa(best)
	return nil
}

// Version returns the negotiated protocol version.
func (c *Client) Version() int { return c.version }

// AgentVersion returns the agent's release string.
func (c *Client) AgentVersion() string { return c.agentVersion }

// Close closes the connection; calls in flight fail with ErrUnavailable.
// Processes in the sandbox keep running.
func (c *Client) Close() error {
	c.conn.note(ErrClientClosed)
	err := c.cc.Close()
	c.conn.Close()
	return err
}

// Done is closed when the connection is lost or closed.
func (c *Client) Done() <-chan struct{} { return c.conn.done }

// Health checks that the agent answers.
func (c *Client) Health(ctx context.Context) error {
	var h HealthInfo
	if err := c.callJSON(ctx, http.MethodGet, c.prefix+PathHealth, nil, nil, &h); err != nil {
		return fmt.Errorf("agent health: %w", err)
	}
	if !h.OK {
		return fmt.Errorf("%w: agent reports unhealthy", errdefs.ErrUnavailable)
	}
	return nil
}

// do sends one request and returns a 2xx response, or the agent's error
// translated into an errdefs kind (the body is then closed).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body io.Reader) (*http.Response, error) {
	u := "http://agent" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%w: building request: %v", errdefs.ErrInvalidArgument, err)
	}
	resp, err := c.cc.RoundTrip(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// callJSON sends in (when not nil) as a JSON body and decodes the response
// into out (when not nil).
func (c *Client) callJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		var err error
		if body, err = jsonBody(in); err != nil {
			return err
		}
	}
	return c.exchange(ctx, method, path, query, body, out)
}

// exchange sends body and decodes the JSON response into out (when not nil).
func (c *Client) exchange(ctx context.Context, method, path string, query url.Values, body io.Reader, out any) error {
	resp, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBody)).Decode(out); err != nil {
		return fmt.Errorf("decoding agent response: %w", transportError(ctx, err))
	}
	return nil
}

// transportError classifies a failure to talk to the agent: the caller's
// own cancellation stays as it is, anything else means the agent is
// unavailable.
func transportError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("agent: %w", ctxErr)
	}
	var synErr *json.SyntaxError
	if errors.As(err, &synErr) {
		return fmt.Errorf("agent: malformed response: %w", err)
	}
	return fmt.Errorf("%w: agent: %v", errdefs.ErrUnavailable, err)
}

// decodeError turns a non-2xx response into an errdefs kind: from the JSON
// error body when there is one, else from the status code.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var w errdefs.Wire
	if json.Unmarshal(b, &w) == nil && w.Error.Code != "" {
		return errdefs.FromCode(w.Error.Code, w.Error.Message)
	}
	return fmt.Errorf("%w: agent answered %s", statusKind(resp.StatusCode), resp.Status)
}

func statusKind(status int) error {
	switch status {
	case http.StatusNotFound:
		return errdefs.ErrNotFound
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return errdefs.ErrInvalidArgument
	case http.StatusConflict:
		return errdefs.ErrFailedPrecondition
	case http.StatusForbidden:
		return errdefs.ErrPermissionDenied
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return errdefs.ErrNotSupported
	case http.StatusTooManyRequests:
		return errdefs.ErrResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return errdefs.ErrUnavailable
	default:
		return errors.New("internal error")
	}
}

// handshakeAttempts bounds Connect's attempts; attempt n may take
// n × handshakeStep before the channel is dropped and dialed anew (a
// channel can stall for good: a vm guest's port just replugged).
const (
	handshakeAttempts = 5
	handshakeStep     = 3 * time.Second
)

// Connect dials with dial and negotiates, trying again when a handshake
// fails on a channel that connected: a byte-stream channel may still carry
// the agent's previous session (a vm guest restored from a saved state
// resumes mid-session); the failed handshake ends that session, and the
// agent serves the next connection afresh.
func Connect(ctx context.Context, dial func(context.Context) (net.Conn, error)) (*Client, error) {
	var lastErr error
	for attempt := 1; attempt <= handshakeAttempts; attempt++ {
		conn, err := dial(ctx)
		if err != nil {
			return nil, fmt.Errorf("dialing agent: %w", err)
		}
		actx, cancel := context.WithTimeout(ctx, time.Duration(attempt)*handshakeStep)
		c, err := NewClient(actx, conn)
		cancel()
		if err == nil {
			return c, nil
		}
		conn.Close()
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agent handshake: %w", lastErr)
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("agent handshake: %w", lastErr)
}

// Identity gives a sandbox restored from a memory snapshot an identity of
// its own (agentapi.IdentityRequest).
func (c *Client) Identity(ctx context.Context, req IdentityRequest) (IdentityResult, error) {
	var res IdentityResult
	b, err := json.Marshal(req)
	if err != nil {
		return res, err
	}
	err = c.exchange(ctx, http.MethodPost, c.prefix+PathIdentity, nil, bytes.NewReader(b), &res)
	return res, err
}

// EndSession asks the agent to close this connection and wait for the
// next one (before a sandbox's state is saved). The Client is closed.
func (c *Client) EndSession(ctx context.Context) error {
	err := c.exchange(ctx, http.MethodPost, c.prefix+PathEndSession, nil, nil, nil)
	c.Close()
	if err != nil {
		return fmt.Errorf("agent end of session: %w", err)
	}
	return nil
}
