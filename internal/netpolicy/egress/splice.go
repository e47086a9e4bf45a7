package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// spliceBuf is the copy buffer of each direction.
const spliceBuf = 32 << 10

// splice copies a to b and b to a until both directions have ended. A
// direction ends at EOF, which half-closes the other side's write end, so
// protocols that shut down one way first keep working. Any other error,
// or no byte moving either way for idle, closes both connections, which
// ends the other direction too.
func splice(a, b net.Conn, idle time.Duration) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(b, a, idle, &last)
	}()
	pipe(a, b, idle, &last)
	<-done
}

// pipe copies src to dst; last is the time of the last byte either way.
func pipe(dst, src net.Conn, idle time.Duration, last *atomic.Int64) {
	buf := make([]byte, spliceBuf)
	for {
		src.SetReadDeadline(time.Now().Add(idle))
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			dst.SetWriteDeadline(time.Now().Add(idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				abort(dst, src)
				return
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, last.Load())) < idle:
			// The other direction is busy: not idle.
		case errors.Is(err, io.EOF):
			closeWrite(dst)
			return
		default:
			abort(dst, src)
			return
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

func abort(a, b net.Conn) {
	a.Close()
	b.Close()
}
