package agentapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"corral/internal/errdefs"
)

// Watch opens a watch of directory path (recursive: and every directory
// below it, as they appear) and returns its stream once the watch is set
// up. Agents older than protocol WatchSince cannot watch: that is
// ErrNotSupported naming the agent. Cancelling ctx or closing the stream
// ends the watch.
func (c *Client) Watch(ctx context.Context, path string, recursive bool, user string) (*WatchStream, error) {
	if c.version < WatchSince {
		return nil, fmt.Errorf("%w: the sandbox's agent (%s) speaks protocol %d; watching files needs protocol %d (the sandbox runs an agent frozen in an older image or memory snapshot)",
			errdefs.ErrNotSupported, c.agentVersion, c.version, WatchSince)
	}
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	if user != "" {
		q.Set("user", user)
	}
	resp, err := c.do(ctx, http.MethodGet, c.prefix+PathWatch, q, nil)
	if err != nil {
		return nil, fmt.Errorf("agent watch %s: %w", path, err)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 16<<10), MaxEventLine)
	s := &WatchStream{ctx: ctx, body: resp.Body, lines: sc}
	ev, err := s.Recv()
	for err == nil && ev.Type == EventKeepalive {
		ev, err = s.Recv()
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	if ev.Type != WatchStart {
		s.Close()
		return nil, fmt.Errorf("agent watch %s: the stream began with %q, not start", path, ev.Type)
	}
	s.Path = ev.Path
	return s, nil
}

// WatchStream is the event stream of one watch. It is not safe for
// concurrent Recv calls.
type WatchStream struct {
	// Path is the watched directory inside the sandbox (symlinks
	// resolved), from the start event.
	Path  string
	ctx   context.Context
	body  io.ReadCloser
	lines *bufio.Scanner
	ended bool
}

// Recv returns the next event, keepalives included (one every
// KeepaliveInterval of silence: a relay passes them on to keep its own
// stream alive). After the end event has been returned, Recv returns
// io.EOF; a stream that breaks before its end event yields an error
// wrapping errdefs.ErrUnavailable.
func (s *WatchStream) Recv() (WatchEvent, error) {
	if s.ended {
		return WatchEvent{}, io.EOF
	}
	if s.lines.Scan() {
		var ev WatchEvent
		if err := json.Unmarshal(s.lines.Bytes(), &ev); err != nil {
			s.body.Close()
			return WatchEvent{}, fmt.Errorf("agent: malformed watch event: %w", err)
		}
		if ev.Type == WatchEnd {
			s.ended = true
			s.body.Close()
		}
		return ev, nil
	}
	err := s.lines.Err()
	s.body.Close()
	switch {
	case err == nil:
		return WatchEvent{}, fmt.Errorf("%w: agent: watch stream ended before its end event", errdefs.ErrUnavailable)
	case errors.Is(err, bufio.ErrTooLong):
		return WatchEvent{}, fmt.Errorf("agent: watch event longer than %d bytes: %w", MaxEventLine, err)
	default:
		return WatchEvent{}, transportError(s.ctx, err)
	}
}

// Close ends the watch.
func (s *WatchStream) Close() error { return s.body.Close() }
