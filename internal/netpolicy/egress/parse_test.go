package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// clientHello captures the first TLS record crypto/tls sends for cfg.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go tls.Client(a, cfg).Handshake()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(b, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

// fragment re-splits a single-record ClientHello into records of at most
// n bytes of handshake data each.
func fragment(rec []byte, n int) []byte {
	var out []byte
	for data := rec[5:]; len(data) > 0; {
		k := min(n, len(data))
		out = append(out, recordHandshake, rec[1], rec[2], byte(k>>8), byte(k))
		out = append(out, data[:k]...)
		data = data[k:]
	}
	return out
}

func TestParseClientHello(t *testing.T) {
	hello := clientHello(t, &tls.Config{ServerName: "Allowed.Test", InsecureSkipVerify: true})
	tls12 := clientHello(t, &tls.Config{ServerName: "a.allowed.test", MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true})
	noSNI := clientHello(t, &tls.Config{InsecureSkipVerify: true})
	lower := clientHello(t, &tls.Config{ServerName: "allowed.test", InsecureSkipVerify: true})
	tests := []struct {
		name string
		in   []byte
		want string
		err  error // sentinel, or nil; malformed is checked with errors.As
		bad  bool
	}{
		{"crypto/tls", hello, "allowed.test", nil, false},
		{"tls 1.2", tls12, "a.allowed.test", nil, false},
		{"fragmented", fragment(hello, 100), "allowed.test", nil, false},
		{"one byte records", fragment(hello, 1), "allowed.test", nil, false},
		{"partial header", hello[:3], "", errNeedMore, false},
		{"partial record", hello[:len(hello)-1], "", errNeedMore, false},
		{"partial fragments", fragment(hello, 50)[:200], "", errNeedMore, false},
		{"no sni", noSNI, "", errNoName, false},
		{"not handshake", append([]byte{23}, hello[1:]...), "", nil, true},
		{"alert after a fragment", append(fragment(hello, 50)[:55], 21, 3, 3, 0, 2, 2, 40), "", nil, true},
		{"zero length record", []byte{22, 3, 1, 0, 0}, "", nil, true},
		{"server hello", []byte{22, 3, 3, 0, 4, 2, 0, 0, 0}, "", nil, true},
		{"bad sni", withSNI(lower, "bad name!.te"), "", nil, true},
		{"sni with trailing dot", withSNI(lower, "allowed.tes."), "allowed.tes", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseClientHello(tt.in)
			var m *malformedError
			switch {
			case tt.bad && !errors.As(err, &m):
				t.Fatalf("got %q, %v; want malformed", got, err)
			case !tt.bad && !errors.Is(err, tt.err):
				t.Fatalf("got %q, %v; want %q, %v", got, err, tt.want, tt.err)
			case got != tt.want:
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// withSNI patches the server name of hello, "allowed.test", with s of
// the same length, so no length field changes.
func withSNI(hello []byte, s string) []byte {
	name := []byte("allowed.test")
	i := bytes.Index(hello, name)
	if i < 0 || len(s) != len(name) {
		panic("withSNI needs a name of the same length in the template")
	}
	out := bytes.Clone(hello)
	copy(out[i:], s)
	return out
}

func TestParseHTTPHost(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  error
		bad  bool
	}{
		{"GET / HTTP/1.1\r\nHost: Allowed.Test\r\n\r\n", "allowed.test", nil, false},
		{"POST /x HTTP/1.1\r\nContent-Length: 3\r\nhost:allowed.test:8080\r\n\r\nabc", "allowed.test", nil, false},
		{"GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "allowed.test", nil, false},
		{"GET http://allowed.test:80/x HTTP/1.1\r\n\r\n", "allowed.test", nil, false},
		{"GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", "2001:db8::1", nil, false},
		{"OPTIONS * HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "allowed.test", nil, false},
		{"GET / HTTP/1.1\r\nHost: allowed.test\r\n", "", errNeedMore, false},
		{"GE", "", errNeedMore, false},
		{"GET / HTTP/1.0\r\n\r\n", "", errNoName, false},
		{"GET / HTTP/1.1\r\nHost: \r\n\r\n", "", errNoName, false},
		{"CONNECT a.test:443 HTTP/1.1\r\n\r\n", "", errConnect, false},
		{"get / HTTP/1.1\r\n\r\n", "", errNotTLSOrHTTP, false},
		{"\x16\x03", "", errNotTLSOrHTTP, false},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "", nil, true},
		{"GET / HTTP/1.1 x\r\n", "", nil, true}, // fails before the header ends
		{"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", "", nil, true},
		{"GET / HTTP/1.1\r\nHost: a.test\nHost: b.test\r\n\r\n", "", nil, true},
		{"GET / HTTP/1.1\r\nHost : a.test\r\n\r\n", "", nil, true},
		{"GET / HTTP/1.1\r\nX: y\r\n Host: a.test\r\n\r\n", "", nil, true},
		{"GET / HTTP/1.1\r\nHost: a.test/evil\r\n\r\n", "", nil, true},
		{"GET / HTTP/1.1\r\nHost: user@a.test\r\n\r\n", "", nil, true},
		{"GET http://b.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "", nil, true},
		{"GET http://a.test@b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", "", nil, true},
		{"GET relative HTTP/1.1\r\nHost: a.test\r\n\r\n", "", nil, true},
		{"GET / HTTP/1.1\r\nHost: a.test:99999x\r\n\r\n", "", nil, true},
	}
	for _, tt := range tests {
		got, err := parseHTTPHost([]byte(tt.in))
		var m *malformedError
		switch {
		case tt.bad && !errors.As(err, &m):
			t.Errorf("%q: got %q, %v; want malformed", tt.in, got, err)
		case !tt.bad && (!errors.Is(err, tt.err) || got != tt.want):
			t.Errorf("%q: got %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func FuzzClientHello(f *testing.F) {
	hello := clientHello(f, &tls.Config{ServerName: "allowed.test", InsecureSkipVerify: true})
	f.Add(hello)
	f.Add(fragment(hello, 7))
	f.Add(clientHello(f, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := parseClientHello(b)
		if err != nil {
			if name != "" {
				t.Fatalf("name %q with error %v", name, err)
			}
			return
		}
		if n, err := hostName(name); err != nil || n != name {
			t.Fatalf("name %q is not canonical: %q, %v", name, n, err)
		}
		// More bytes after a complete ClientHello change nothing.
		if again, err := parseClientHello(append(bytes.Clone(b), 0xff, 0, 1)); err != nil || again != name {
			t.Fatalf("trailing bytes changed the result: %q, %v", again, err)
		}
	})
}

// FuzzHTTPHost checks the Host parser never panics, and never names a
// host that Go's own HTTP server would not also see.
func FuzzHTTPHost(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET http://allowed.test:80/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1]:80\r\nHost: x\r\n\r\n",
		"CONNECT a:1 HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := parseHTTPHost(b)
		if err != nil {
			if name != "" {
				t.Fatalf("name %q with error %v", name, err)
			}
			return
		}
		req, rerr := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
		if rerr != nil {
			return // Go's server would refuse it; nothing leaks
		}
		theirs, herr := hostOnly(req.Host)
		if herr != nil || theirs != name {
			t.Fatalf("we read host %q, net/http reads %q (%q)", name, req.Host, theirs)
		}
	})
}
