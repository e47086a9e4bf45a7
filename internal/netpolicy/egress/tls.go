package egress

import (
	"fmt"
	"strings"
)

// TLS constants (RFC 8446, RFC 6066).
const (
	recordHandshake      = 22
	handshakeClientHello = 1
	extServerName        = 0
	sniHostName          = 0
	maxRecord            = 1 << 14
)

// parseClientHello returns the SNI host name of the TLS ClientHello at the
// start of b, lowercase without a trailing dot. The ClientHello may span
// several records. It returns errNeedMore while b is a valid but partial
// ClientHello, errNoName when it has no server_name, a *malformedError
// for anything that a strict parser would not take: duplicate extensions,
// several host names, trailing bytes, a name that is not a DNS name.
func parseClientHello(b []byte) (string, error) {
	body, err := clientHelloBody(b)
	if err != nil {
		return "", err
	}
	return clientHelloServerName(body)
}

func badTLS(format string, args ...any) error {
	return &malformedError{kind: kindTLS, detail: fmt.Sprintf(format, args...)}
}

// clientHelloBody reassembles the first handshake message from the
// handshake records at the start of b and returns its body.
func clientHelloBody(b []byte) ([]byte, error) {
	var hs []byte
	for {
		if len(b) < 5 {
			return nil, errNeedMore
		}
		if b[0] != recordHandshake {
			return nil, badTLS("record type %d before the end of the client hello", b[0])
		}
		if b[1] != 3 {
			return nil, badTLS("record version %d.%d", b[1], b[2])
		}
		n := int(b[3])<<8 | int(b[4])
		if n == 0 || n > maxRecord {
			return nil, badTLS("record length %d", n)
		}
		frag := b[5:]
		whole := len(frag) >= n
		if whole {
			frag = frag[:n]
		}
		hs = append(hs, frag...)
		if len(hs) >= 4 {
			if hs[0] != handshakeClientHello {
				return nil, badTLS("handshake type %d, want client hello", hs[0])
			}
			l := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
			if l > MaxPeek {
				return nil, errTooLarge
			}
			if len(hs) >= 4+l {
				return hs[4 : 4+l], nil
			}
		}
		if !whole {
			return nil, errNeedMore
		}
		b = b[5+n:]
	}
}

// clientHelloServerName parses a ClientHello body for its server_name.
func clientHelloServerName(body []byte) (string, error) {
	r := reader{b: body}
	r.take(2 + 32) // legacy_version, random
	if sid := r.vec8(); len(sid) > 32 {
		return "", badTLS("session id of %d bytes", len(sid))
	}
	if cs := r.vec16(); len(cs) < 2 || len(cs)%2 != 0 {
		return "", badTLS("cipher suites of %d bytes", len(cs))
	}
	if cm := r.vec8(); len(cm) < 1 {
		return "", badTLS("no compression methods")
	}
	if r.bad {
		return "", badTLS("truncated")
	}
	if r.empty() {
		return "", errNoName // no extensions at all
	}
	exts := reader{b: r.vec16()}
	if r.bad || !r.empty() {
		return "", badTLS("extensions length does not match the message")
	}
	seen := map[int]bool{}
	name := ""
	for !exts.empty() {
		typ, data := exts.u16(), exts.vec16()
		if exts.bad {
			return "", badTLS("truncated extension")
		}
		if seen[typ] {
			return "", badTLS("extension %d twice", typ)
		}
		seen[typ] = true
		if typ == extServerName {
			var err error
			if name, err = serverNameExtension(data); err != nil {
				return "", err
			}
		}
	}
	if name == "" {
		return "", errNoName
	}
	return name, nil
}

// serverNameExtension parses the server_name extension's data: exactly
// one host_name.
func serverNameExtension(data []byte) (string, error) {
	r := reader{b: data}
	list := reader{b: r.vec16()}
	if r.bad || !r.empty() || list.empty() {
		return "", badTLS("server_name list length")
	}
	name := ""
	for !list.empty() {
		typ, v := list.u8(), list.vec16()
		switch {
		case list.bad:
			return "", badTLS("truncated server_name")
		case typ != sniHostName:
			return "", badTLS("server_name type %d", typ)
		case name != "":
			return "", badTLS("two host names")
		}
		n, err := hostName(string(v))
		if err != nil {
			return "", badTLS("server name %q: %v", v, err)
		}
		name = n
	}
	return name, nil
}

// hostName checks and canonicalises a DNS name as the policy sees it:
// lowercase, no trailing dot, letters, digits, '-' and '_' in labels of 1
// to 63 bytes, 253 bytes at most.
func hostName(s string) (string, error) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if len(s) == 0 || len(s) > 253 {
		return "", fmt.Errorf("length %d", len(s))
	}
	label := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if label == 0 {
				return "", fmt.Errorf("empty label")
			}
			label = 0
			continue
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return "", fmt.Errorf("byte %#x", c)
		}
		if label++; label > 63 {
			return "", fmt.Errorf("label longer than 63 bytes")
		}
	}
	if label == 0 {
		return "", fmt.Errorf("empty label")
	}
	return s, nil
}

// reader reads TLS vectors; any overrun sets bad and yields zero values.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() int {
	if v := r.take(1); v != nil {
		return int(v[0])
	}
	return 0
}

func (r *reader) u16() int {
	if v := r.take(2); v != nil {
		return int(v[0])<<8 | int(v[1])
	}
	return 0
}

func (r *reader) vec8() []byte  { return r.take(r.u8()) }
func (r *reader) vec16() []byte { return r.take(r.u16()) }
func (r *reader) empty() bool   { return len(r.b) == 0 }
