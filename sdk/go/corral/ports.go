package corral

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"corral/pkg/apiv1"
)

// PortURL returns the URL of an exposed port for a browser or curl: on
// the daemon's ports origin (a host of its own per sandbox port) when the
// daemon serves one, else the port's path on the API (which programs may
// use, and browsers are refused), with the port token in the query when
// the port is not public.
func (c *Client) PortURL(ctx context.Context, id string, port int) (string, error) {
	sb, err := c.Get(ctx, id)
	if err != nil {
		return "", err
	}
	for _, p := range sb.Ports {
		if p.Port != port {
			continue
		}
		u := c.BaseURL + p.URL
		if p.BrowserURL != "" {
			u = p.BrowserURL
		}
		if !p.Public {
			u += "?corral_token=" + url.QueryEscape(sb.PortToken)
		}
		return u, nil
	}
	return "", &Error{Status: 404, Code: "not_found", Message: fmt.Sprintf("port %d of sandbox %s is not exposed", port, id)}
}

// Tunnel opens a raw TCP stream to an exposed port through the daemon.
func (c *Client) Tunnel(ctx context.Context, id string, port int) (net.Conn, error) {
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("tunnels need an http:// daemon URL, not %s", u.Scheme)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("calling corral at %s: %w", c.BaseURL, err)
	}
	req, _ := http.NewRequest("GET", c.url(sbPath(id, fmt.Sprintf("/tunnel/%d", port)), nil), nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "corral-tcp")
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		var e apiv1.Error
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e) == nil && e.Error.Code != "" {
			return nil, &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
		}
		return nil, fmt.Errorf("tunnel: %s", resp.Status)
	}
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn reads what the response reader already buffered first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// CloseWrite half-closes the TCP connection to the daemon.
func (b *bufferedConn) CloseWrite() error {
	if tc, ok := b.Conn.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return nil
}
