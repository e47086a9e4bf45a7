package egress

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
)

// maxMethod bounds an HTTP method token.
const maxMethod = 20

var crlf = []byte("\r\n")

func badHTTP(format string, args ...any) error {
	return &malformedError{kind: kindHTTP, detail: fmt.Sprintf(format, args...)}
}

// parseHTTPHost returns the host an HTTP/1.x request header at the start
// of b is for (from Host, or an absolute-form target, which must agree),
// lowercase, without port or trailing dot. It is strict where servers
// differ, so that no server reads another host than the proxy did: CRLF
// line ends only, no folded or space-padded header names, exactly one Host
// header. It returns errNotTLSOrHTTP when b does not start like a request,
// errNeedMore until the header is complete, errNoName without a host,
// errConnect for CONNECT, and a *malformedError otherwise.
func parseHTTPHost(b []byte) (string, error) {
	if err := checkMethod(b); err != nil {
		return "", err
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		// Fail early on a bad request line rather than wait for more.
		if i := bytes.Index(b, crlf); i >= 0 {
			if _, err := requestTarget(b[:i]); err != nil {
				return "", err
			}
		}
		return "", errNeedMore
	}
	lines := bytes.Split(b[:end], crlf)
	target, err := requestTarget(lines[0])
	if err != nil {
		return "", err
	}
	header, seen, err := hostHeader(lines[1:])
	if err != nil {
		return "", err
	}
	abs, isAbs, err := absoluteHost(target)
	if err != nil {
		return "", err
	}
	var host string
	if seen {
		if host, err = hostOnly(header); err != nil {
			return "", err
		}
	}
	switch {
	case isAbs && seen && abs != host:
		return "", badHTTP("host header %q and request target %q differ", header, target)
	case isAbs:
		return abs, nil
	case !seen:
		return "", errNoName
	}
	return host, nil
}

// checkMethod reports whether b starts with an upper-case method token and
// a space (errNeedMore while it may still).
func checkMethod(b []byte) error {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == ' ' && i > 0:
			return nil
		case c < 'A' || c > 'Z' || i >= maxMethod:
			return errNotTLSOrHTTP
		}
	}
	return errNeedMore
}

// requestTarget checks a request line and returns its target.
func requestTarget(line []byte) (string, error) {
	parts := strings.Split(string(line), " ")
	if len(parts) != 3 {
		return "", badHTTP("request line has %d fields", len(parts))
	}
	method, target, version := parts[0], parts[1], parts[2]
	if version != "HTTP/1.1" && version != "HTTP/1.0" {
		return "", badHTTP("version %q", version)
	}
	if method == "CONNECT" {
		return "", errConnect
	}
	if target == "" {
		return "", badHTTP("empty target")
	}
	for i := 0; i < len(target); i++ {
		if target[i] <= ' ' || target[i] >= 0x7f {
			return "", badHTTP("byte %#x in target", target[i])
		}
	}
	return target, nil
}

// hostHeader finds the one Host header among the header lines.
func hostHeader(lines [][]byte) (value string, seen bool, err error) {
	for _, line := range lines {
		if bytes.ContainsAny(line, "\r\n") {
			return "", false, badHTTP("bare CR or LF")
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return "", false, badHTTP("header line without a name")
		}
		name := line[:colon]
		for _, c := range name {
			if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), c) >= 0 {
				return "", false, badHTTP("byte %#x in header name", c)
			}
		}
		if !strings.EqualFold(string(name), "host") {
			continue
		}
		if seen {
			return "", false, badHTTP("two host headers")
		}
		seen = true
		value = strings.Trim(string(line[colon+1:]), " \t")
	}
	return value, seen, nil
}

// absoluteHost returns the host of an absolute-form target
// ("http://host:port/path"); isAbs is false for origin-form ("/path") and
// asterisk-form ("*").
func absoluteHost(target string) (host string, isAbs bool, err error) {
	if target[0] == '/' || target == "*" {
		return "", false, nil
	}
	scheme, rest, ok := strings.Cut(target, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/?#") {
		return "", false, badHTTP("target %q", target)
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if strings.Contains(authority, "@") {
		return "", false, badHTTP("user info in target")
	}
	host, err = hostOnly(authority)
	return host, true, err
}

// hostOnly returns the host of a host[:port] (or [v6]:port) as a
// canonical name or address literal.
func hostOnly(hostport string) (string, error) {
	if hostport == "" {
		return "", errNoName
	}
	host, port := hostport, ""
	if hostport[0] == '[' {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", badHTTP("host %q", hostport)
		}
		a, err := netip.ParseAddr(hostport[1:end])
		if err != nil || a.Zone() != "" {
			return "", badHTTP("host %q", hostport)
		}
		rest := hostport[end+1:]
		if rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return "", badHTTP("host %q", hostport)
		}
		return a.String(), nil
	}
	if i := strings.IndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
		if !validPort(port) {
			return "", badHTTP("port in host %q", hostport)
		}
	}
	name, err := hostName(host)
	if err != nil {
		return "", badHTTP("host %q: %v", hostport, err)
	}
	return name, nil
}

// validPort accepts up to five digits (or none: "host:" is allowed).
func validPort(s string) bool {
	if len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
