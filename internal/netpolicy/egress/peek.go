package egress

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// What the first bytes of a connection were.
type kind int

const (
	kindUnknown kind = iota
	kindTLS
	kindHTTP
)

// Parser outcomes besides a name.
var (
	errNeedMore     = errors.New("need more bytes")
	errNotTLSOrHTTP = errors.New("neither a tls client hello nor an http/1.x request")
	errNoName       = errors.New("no server name")
	errConnect      = errors.New("http connect request")
	errTooLarge     = errors.New("client hello or request header too large")
	errIncomplete   = errors.New("no complete client hello or request header")
)

// malformedError is a ClientHello or request that does not parse.
type malformedError struct {
	kind   kind
	detail string
}

func (e *malformedError) Error() string {
	if e.kind == kindTLS {
		return "malformed tls client hello: " + e.detail
	}
	return "malformed http request: " + e.detail
}

// peekReason maps a peek or parse error to a decision reason.
func peekReason(err error) string {
	var m *malformedError
	switch {
	case errors.As(err, &m) && m.kind == kindTLS:
		return ReasonBadTLS
	case errors.As(err, &m):
		return ReasonBadHTTP
	case errors.Is(err, errNoName):
		return ReasonNoName
	case errors.Is(err, errConnect):
		return ReasonConnect
	case errors.Is(err, errTooLarge):
		return ReasonTooLarge
	case errors.Is(err, errIncomplete):
		return ReasonPeekTimeout
	}
	return ReasonNotTLSOrHTTP
}

// peekName reads from c, for at most timeout and MaxPeek bytes, until the
// bytes read are a complete TLS ClientHello or HTTP/1.x request header,
// and returns them with the name they carry. The name comes back with
// some errors too (for the decision log) when it was found.
func peekName(c net.Conn, timeout time.Duration) ([]byte, kind, string, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 0, 2048)
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= MaxPeek {
				return buf, kindUnknown, "", errTooLarge
			}
			buf = append(make([]byte, 0, min(2*cap(buf), MaxPeek)), buf...)
		}
		n, rerr := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		k, name, err := classify(buf)
		if !errors.Is(err, errNeedMore) {
			return buf, k, name, err
		}
		if rerr != nil {
			return buf, k, "", fmt.Errorf("%w: %w", errIncomplete, rerr)
		}
	}
}

// classify parses the bytes a connection started with.
func classify(b []byte) (kind, string, error) {
	if len(b) == 0 {
		return kindUnknown, "", errNeedMore
	}
	if b[0] == recordHandshake {
		name, err := parseClientHello(b)
		return kindTLS, name, err
	}
	name, err := parseHTTPHost(b)
	if errors.Is(err, errNotTLSOrHTTP) {
		return kindUnknown, "", err
	}
	return kindHTTP, name, err
}
