package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"syscall"

	"corral/internal/errdefs"
)

// Start starts a process and returns its event stream; the first event is
// start (with the pid). A failure to start is an error here, not an event.
// ctx bounds the stream, not the process: cancelling it detaches.
func (c *Client) Start(ctx context.Context, req StartRequest) (*Stream, error) {
	if req.KillTree && c.version < KillTreeSince {
		return nil, fmt.Errorf("%w: kill_tree needs an agent of protocol %d; this sandbox's agent (%s) speaks %d (an older image or snapshot)",
			errdefs.ErrFailedPrecondition, KillTreeSince, c.agentVersion, c.version)
	}
	return c.openStream(ctx, PathStart, req)
}

// Connect re-attaches to a process by pid (when pid > 0) or by tag: a start
// event, the output not yet delivered to anyone, the output from now on, and
// the end event.
func (c *Client) Connect(ctx context.Context, pid int, tag string) (*Stream, error) {
	req := ConnectRequest{PID: pid}
	if pid <= 0 {
		req = ConnectRequest{Tag: tag}
	}
	return c.openStream(ctx, PathConnect, req)
}

func (c *Client) openStream(ctx context.Context, path string, in any) (*Stream, error) {
	body, err := jsonBody(in)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, http.MethodPost, c.prefix+path, nil, body)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", path, err)
	}
	return newStream(ctx, resp), nil
}

// List returns the processes still running.
func (c *Client) List(ctx context.Context) ([]ProcessInfo, error) {
	var out ProcessList
	if err := c.callJSON(ctx, http.MethodGet, c.prefix+PathList, nil, nil, &out); err != nil {
		return nil, fmt.Errorf("agent list processes: %w", err)
	}
	return out.Processes, nil
}

// Stdin streams r into the process's stdin (or terminal) until r's EOF; with
// closeAfter, stdin is closed afterwards.
func (c *Client) Stdin(ctx context.Context, pid int, r io.Reader, closeAfter bool) error {
	q := url.Values{"pid": {strconv.Itoa(pid)}}
	if closeAfter {
		q.Set("close", "1")
	}
	if r == nil {
		r = http.NoBody
	}
	resp, err := c.do(ctx, http.MethodPost, c.prefix+PathStdin, q, r)
	if err != nil {
		return fmt.Errorf("agent stdin of pid %d: %w", pid, err)
	}
	resp.Body.Close()
	return nil
}

// CloseStdin closes the process's stdin (for a terminal, sends end-of-file).
func (c *Client) CloseStdin(ctx context.Context, pid int) error {
	if err := c.callJSON(ctx, http.MethodPost, c.prefix+PathCloseStdin, nil, PIDRequest{PID: pid}, nil); err != nil {
		return fmt.Errorf("agent close stdin of pid %d: %w", pid, err)
	}
	return nil
}

// Signal sends sig to the process's group.
func (c *Client) Signal(ctx context.Context, pid int, sig syscall.Signal) error {
	req := SignalRequest{PID: pid, Signal: int(sig)}
	if err := c.callJSON(ctx, http.MethodPost, c.prefix+PathSignal, nil, req, nil); err != nil {
		return fmt.Errorf("agent signal %d to pid %d: %w", sig, pid, err)
	}
	return nil
}

// Resize changes a PTY process's terminal size.
func (c *Client) Resize(ctx context.Context, pid int, cols, rows uint16) error {
	req := ResizeRequest{PID: pid, Cols: cols, Rows: rows}
	if err := c.callJSON(ctx, http.MethodPost, c.prefix+PathResize, nil, req, nil); err != nil {
		return fmt.Errorf("agent resize pid %d: %w", pid, err)
	}
	return nil
}

func jsonBody(in any) (io.Reader, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding request: %v", errdefs.ErrInvalidArgument, err)
	}
	return bytes.NewReader(b), nil
}
