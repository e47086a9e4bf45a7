package corral

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"corral/pkg/apiv1"
)

// maxEventLine bounds one NDJSON line of a process stream.
const maxEventLine = 1 << 20

// Stream is the output of a started process.
type Stream struct {
	resp *http.Response
	sc   *bufio.Scanner
	pid  int
}

// Exec starts a process and returns its stream once it started (the first
// event, carrying the pid, has been read).
func (c *Client) Exec(ctx context.Context, id string, req apiv1.ExecRequest) (*Stream, error) {
	resp, err := c.doJSON(ctx, "POST", sbPath(id, "/processes"), req)
	if err != nil {
		return nil, err
	}
	return newStream(resp)
}

// Attach re-attaches to a running process.
func (c *Client) Attach(ctx context.Context, id string, pid int) (*Stream, error) {
	resp, err := c.do(ctx, "GET", sbPath(id, "/processes/", strconv.Itoa(pid), "/events"), nil, nil, "")
	if err != nil {
		return nil, err
	}
	return newStream(resp)
}

func newStream(resp *http.Response) (*Stream, error) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	s := &Stream{resp: resp, sc: sc}
	ev, err := s.Next()
	if err != nil {
		s.Close()
		return nil, err
	}
	if ev.Type != apiv1.EventStart {
		s.Close()
		return nil, fmt.Errorf("process stream began with %q, not start: %s", ev.Type, ev.Error)
	}
	s.pid = ev.PID
	return s, nil
}

func (c *Client) doJSON(ctx context.Context, method, path string, in any) (*http.Response, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, method, path, nil, bytesReader(b), "application/json")
}

// PID is the process id inside the sandbox.
func (s *Stream) PID() int { return s.pid }

// Next returns the next event; io.EOF when the stream ended.
func (s *Stream) Next() (apiv1.ExecEvent, error) {
	return nextLine[apiv1.ExecEvent](s.sc, "process event")
}

// Close ends the stream (a foreground process is then killed by the daemon).
func (s *Stream) Close() error { return s.resp.Body.Close() }

// Result is how a process ended.
type Result struct {
	ExitCode int
	Signal   string
	TimedOut bool
	// OOMKilled: a kernel's OOM killer killed the process (or one it
	// waited for) for memory; Error then says the sandbox's limit.
	OOMKilled bool
	Error     string
}

// Copy writes the stream's output to stdout and stderr (PTY output goes to
// stdout) until the end event.
func (s *Stream) Copy(stdout, stderr io.Writer) (Result, error) {
	for {
		ev, err := s.Next()
		if err != nil {
			return Result{}, fmt.Errorf("process stream ended early: %w", err)
		}
		switch ev.Type {
		case apiv1.EventStdout, apiv1.EventPTY:
			if _, err := stdout.Write(ev.Data); err != nil {
				return Result{}, err
			}
		case apiv1.EventStderr:
			if _, err := stderr.Write(ev.Data); err != nil {
				return Result{}, err
			}
		case apiv1.EventEnd:
			if ev.ExitCode < 0 && ev.Error != "" {
				return Result{}, errors.New(ev.Error)
			}
			return Result{ExitCode: ev.ExitCode, Signal: ev.Signal, TimedOut: ev.TimedOut, OOMKilled: ev.OOMKilled, Error: ev.Error}, nil
		}
	}
}

// Run starts a process, forwards stdin (if not nil; closed at its EOF) and
// copies its output until it ends.
func (c *Client) Run(ctx context.Context, id string, req apiv1.ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (Result, error) {
	req.Stdin = stdin != nil
	s, err := c.Exec(ctx, id, req)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	if stdin != nil {
		go func() { _ = c.Stdin(ctx, id, s.PID(), stdin, true) }()
	}
	return s.Copy(stdout, stderr)
}

// Stdin streams r to a process's stdin; closeAfter closes it at EOF.
func (c *Client) Stdin(ctx context.Context, id string, pid int, r io.Reader, closeAfter bool) error {
	q := url.Values{}
	if closeAfter {
		q.Set("close", "true")
	}
	resp, err := c.do(ctx, "POST", sbPath(id, "/processes/", strconv.Itoa(pid), "/stdin"), q, io.NopCloser(r), "application/octet-stream")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Signal sends a signal ("TERM", "KILL", "9") to a process group.
func (c *Client) Signal(ctx context.Context, id string, pid int, sig string) error {
	return c.call(ctx, "POST", sbPath(id, "/processes/", strconv.Itoa(pid), "/signal"), nil, apiv1.SignalRequest{Signal: sig}, nil)
}

// Resize changes a PTY process's terminal size.
func (c *Client) Resize(ctx context.Context, id string, pid int, cols, rows uint16) error {
	return c.call(ctx, "POST", sbPath(id, "/processes/", strconv.Itoa(pid), "/resize"), nil, apiv1.PTYSize{Cols: cols, Rows: rows}, nil)
}

// Processes lists a sandbox's running processes.
func (c *Client) Processes(ctx context.Context, id string) ([]apiv1.Process, error) {
	var out apiv1.ProcessList
	err := c.call(ctx, "GET", sbPath(id, "/processes"), nil, nil, &out)
	return out.Processes, err
}
