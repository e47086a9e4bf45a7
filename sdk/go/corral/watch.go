package corral

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"

	"corral/pkg/apiv1"
)

// WatchStream is an open watch of a directory in a sandbox.
type WatchStream struct {
	// Path is the watched directory inside the sandbox (symlinks
	// resolved).
	Path string
	resp *http.Response
	sc   *bufio.Scanner
}

// Watch watches directory path in a sandbox (recursive: and every
// directory below it, as they appear) and returns once the watch is set
// up: changes made after it returns are reported. A relative path starts
// at the sandbox's workdir, as for other file calls.
func (c *Client) Watch(ctx context.Context, id, path string, recursive bool, opts ...FileOption) (*WatchStream, error) {
	q := fileOpts(opts).query(url.Values{"path": {path}})
	if recursive {
		q.Set("recursive", "true")
	}
	resp, err := c.do(ctx, "GET", sbPath(id, "/files/watch"), q, nil, "")
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 16<<10), maxEventLine)
	s := &WatchStream{resp: resp, sc: sc}
	ev, err := s.Next()
	if err != nil {
		s.Close()
		return nil, err
	}
	if ev.Type != apiv1.WatchStart {
		s.Close()
		return nil, fmt.Errorf("watch stream began with %q, not start: %s", ev.Type, ev.Error)
	}
	s.Path = ev.Path
	return s, nil
}

// Next returns the next event, keepalives swallowed; io.EOF once the
// stream ended (after an end event, or when the daemon went away).
func (s *WatchStream) Next() (apiv1.WatchEvent, error) {
	for {
		ev, err := nextLine[apiv1.WatchEvent](s.sc, "watch event")
		if err != nil || ev.Type != apiv1.WatchKeepalive {
			return ev, err
		}
	}
}

// Close ends the watch.
func (s *WatchStream) Close() error { return s.resp.Body.Close() }
