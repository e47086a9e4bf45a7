package agentapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// DialPort opens a byte stream to TCP port on the sandbox's loopback,
// carried by one HTTP/2 stream. The returned conn's deadlines are not
// supported (they return nil and do nothing); cancel ctx or Close instead.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	conn, err := c.dialStream(ctx, PathPortConnect, url.Values{"port": {strconv.Itoa(port)}}, port)
	if err != nil {
		return nil, fmt.Errorf("agent port %d: %w", port, err)
	}
	return conn, nil
}

// dialStream POSTs to path with q and returns the full-duplex stream as a
// net.Conn (the request body out, the response body in); port names it.
func (c *Client) dialStream(ctx context.Context, path string, q url.Values, port int) (net.Conn, error) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.do(ctx, http.MethodPost, c.prefix+path, q, pr)
	if err != nil {
		cancel()
		pw.Close()
		return nil, err
	}
	return &portConn{body: resp.Body, pw: pw, cancel: cancel, port: port}, nil
}

// portConn adapts an HTTP/2 stream to net.Conn.
type portConn struct {
	body   io.ReadCloser
	pw     *io.PipeWriter
	cancel context.CancelFunc
	port   int
	once   sync.Once
}

func (p *portConn) Read(b []byte) (int, error)  { return p.body.Read(b) }
func (p *portConn) Write(b []byte) (int, error) { return p.pw.Write(b) }

// CloseWrite ends the stream toward the sandbox (a half-close).
func (p *portConn) CloseWrite() error { return p.pw.Close() }

func (p *portConn) Close() error {
	p.once.Do(func() {
		p.pw.Close()
		p.body.Close()
		p.cancel()
	})
	return nil
}

func (p *portConn) LocalAddr() net.Addr  { return portAddr("agent") }
func (p *portConn) RemoteAddr() net.Addr { return portAddr("sandbox:" + strconv.Itoa(p.port)) }

func (p *portConn) SetDeadline(time.Time) error      { return nil }
func (p *portConn) SetReadDeadline(time.Time) error  { return nil }
func (p *portConn) SetWriteDeadline(time.Time) error { return nil }

type portAddr string

func (a portAddr) Network() string { return "corral-agent" }
func (a portAddr) String() string  { return string(a) }
