package agentapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"corral/internal/errdefs"
)

// Stream is the NDJSON event stream of one process: a start event, output
// events, then an end event. It is not safe for concurrent Recv calls.
// Closing it (or cancelling the context it was opened with) detaches from
// the process without stopping it.
type Stream struct {
	ctx   context.Context
	body  io.ReadCloser
	lines *bufio.Scanner
	ended bool
}

func newStream(ctx context.Context, resp *http.Response) *Stream {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxEventLine)
	return &Stream{ctx: ctx, body: resp.Body, lines: sc}
}

// Recv returns the next event. Keepalives are swallowed. After the end event
// has been returned, Recv returns io.EOF. A stream that breaks before its end
// event yields an error wrapping errdefs.ErrUnavailable (the process itself
// may still be running: Connect re-attaches).
func (s *Stream) Recv() (Event, error) {
	if s.ended {
		return Event{}, io.EOF
	}
	for s.lines.Scan() {
		var ev Event
		if err := json.Unmarshal(s.lines.Bytes(), &ev); err != nil {
			s.body.Close()
			return Event{}, fmt.Errorf("agent: malformed event: %w", err)
		}
		switch ev.Type {
		case EventKeepalive:
			continue
		case EventEnd:
			s.ended = true
			s.body.Close()
		}
		return ev, nil
	}
	err := s.lines.Err()
	s.body.Close()
	switch {
	case err == nil:
		return Event{}, fmt.Errorf("%w: agent: stream ended before the end event", errdefs.ErrUnavailable)
	case errors.Is(err, bufio.ErrTooLong):
		return Event{}, fmt.Errorf("agent: event longer than %d bytes: %w", MaxEventLine, err)
	default:
		return Event{}, transportError(s.ctx, err)
	}
}

// Close detaches from the process; the process keeps running.
func (s *Stream) Close() error {
	return s.body.Close()
}
