package agent

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"corral/internal/errdefs"
)

// portDialTimeout bounds the connect to a port inside the sandbox.
const portDialTimeout = 5 * time.Second

// portConnect is POST /v1/port/connect?port=N: a byte stream to TCP port N
// on the sandbox's loopback, carried by this one HTTP/2 stream (request
// body in, response body out). The daemon uses it for exposed ports, so
// they work whatever the sandbox's network policy.
func (s *Server) portConnect(w http.ResponseWriter, r *http.Request) error {
	port, err := strconv.Atoi(r.URL.Query().Get("port"))
	if err != nil || port < 1 || port > 65535 {
		return errdefs.Invalid("port", "%q is not a TCP port", r.URL.Query().Get("port"))
	}
	conn, err := dialLocal(r, port)
	if err != nil {
		return err
	}
	spliceStream(w, r, conn)
	return nil
}

// spliceStream carries conn as the stream of r: the request body into
// conn (its write side closed at the body's end), conn into the response.
// Once the sandbox's side has ended, so does the stream: the caller sees
// EOF even if it never half-closes (an HTTP/1.0 server's close). The copy
// toward the sandbox ends with it (the body is closed when the handler
// returns, conn here).
func spliceStream(w http.ResponseWriter, r *http.Request, conn *net.TCPConn) {
	defer conn.Close()
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	go func() {
		_, _ = io.Copy(conn, r.Body)
		_ = conn.CloseWrite()
	}()
	copyFlushing(w, rc, conn)
}

// dialLocal connects to port on the sandbox's IPv4 loopback, then IPv6.
func dialLocal(r *http.Request, port int) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: portDialTimeout}
	var firstErr error
	for _, host := range []string{"127.0.0.1", "::1"} {
		c, err := d.DialContext(r.Context(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return c.(*net.TCPConn), nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if errors.Is(firstErr, syscall.ECONNREFUSED) {
		return nil, errdefs.Invalid("port", "nothing listens on port %d in the sandbox", port)
	}
	return nil, errdefs.Invalid("port", "connecting to port %d in the sandbox: %v", port, firstErr)
}

// copyFlushing copies src to w, flushing after every read so that
// interactive protocols see each byte as it comes.
func copyFlushing(w io.Writer, rc *http.ResponseController, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
