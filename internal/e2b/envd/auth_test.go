package envd

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheckSignature(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const tok = "abc123" // access tokens are hex
	// The e2b SDK signs "<path>:<op>:<user>:<token>[:<exp>]" (user "" when
	// unset); only the form with an expiration is accepted.
	sig := Sign("/home/user/a.txt:read::abc123:1800000060")
	far := "1800604801" // 7 days and a second ahead
	tests := []struct {
		name, path, op, user, sig, exp, want string
	}{
		{"good", "/home/user/a.txt", "read", "", sig, "1800000060", ""},
		{"no expiry", "/a", "write", "user", Sign("/a:write:user:abc123"), "", msgNoExpiration},
		{"expired", "/a", "read", "", Sign("/a:read::abc123:1799999999"), "1799999999", msgExpired},
		{"too far ahead", "/a", "read", "", Sign("/a:read::abc123:" + far), far, msgTooFar},
		{"at the maximum", "/a", "read", "", Sign("/a:read::abc123:1800604800"), "1800604800", ""},
		{"forged and expired", "/a", "read", "", "v1_forged", "1799999999", msgInvalidSignature},
		{"other op", "/home/user/a.txt", "write", "", sig, "1800000060", msgInvalidSignature},
		{"other user", "/home/user/a.txt", "read", "root", sig, "1800000060", msgInvalidSignature},
		{"other expiry", "/home/user/a.txt", "read", "", sig, "1900000000", msgInvalidSignature},
		{"bad expiry", "/a", "read", "", sig, "soon", msgBadExpiration},
		{"expiry with a leading zero", "/a", "read", "", Sign("/a:read::abc123:01800000060"), "01800000060", msgBadExpiration},
		{"expiry with a sign", "/a", "read", "", Sign("/a:read::abc123:+1800000060"), "+1800000060", msgBadExpiration},
		// The user "x:abc123" would re-split the string as another request's.
		{"a user with a colon", "/a:read", "write", "x", Sign("/a:read:write:x:abc123:1800000060"), "1800000060", ""},
		{"the same string, split otherwise", "/a", "read", "write:x", Sign("/a:read:write:x:abc123:1800000060"), "1800000060", msgInvalidSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkSignature(tt.path, tt.op, tt.user, tok, tt.sig, tt.exp, now); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	// The SDK's own output for one input (node: getSignature with
	// path "/x", operation "read", user "user", token "t", no expiry).
	if got := Sign("/x:read:user:t"); got != "v1_"+sdkVector {
		t.Errorf("Sign = %s, want the SDK's v1_%s", got, sdkVector)
	}
}

func TestTarget(t *testing.T) {
	tests := []struct {
		host, id, port string
		wantID         string
		wantPort       int
		bad            bool
	}{
		{host: "x", id: "sb-abc", port: "49983", wantID: "sb-abc", wantPort: 49983},
		{host: "49983-sb-abc.e2b.local", wantID: "sb-abc", wantPort: 49983},
		{host: "8080-sb-abc.e2b.local:1234", wantID: "sb-abc", wantPort: 8080},
		{host: "x", id: "sb-abc", wantID: "sb-abc", wantPort: 49983},
		{host: "localhost", bad: true},
		{host: "x", id: "sb-abc", port: "0", bad: true},
		{host: "x", id: "sb-abc", port: "http", bad: true},
		{host: "abc-sb.x", bad: true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/health", nil)
		r.Host = tt.host
		if tt.id != "" {
			r.Header.Set(sandboxIDHeader, tt.id)
		}
		if tt.port != "" {
			r.Header.Set(sandboxPortHeader, tt.port)
		}
		id, port, err := target(r)
		if tt.bad != (err != nil) || !tt.bad && (id != tt.wantID || port != tt.wantPort) {
			t.Errorf("host %q id %q port %q: %q %d %v", tt.host, tt.id, tt.port, id, port, err)
		}
	}
}

// sdkVector is what e2b@2.51.0's getSignature printed for the input above.
const sdkVector = "TxP2x49zuMAoxFBHS0OxO8i7ZFPtNVsckE2+96pF1NA"

// FuzzRouting: no Host, header or query a client sends makes the routing,
// the signature check or the user parsing panic, and what routing accepts
// is a sandbox id and a TCP port.
func FuzzRouting(f *testing.F) {
	f.Add("49983-sb-abc.e2b.local", "", "", "/a", "v1_x", "123", "Basic dXNlcjo=")
	f.Add("x", "sb-abc", "8080", "", "", "", "Basic !!")
	f.Fuzz(func(t *testing.T, host, id, port, path, sig, exp, authz string) {
		r := httptest.NewRequest(http.MethodGet, "/files", nil)
		r.Host = host
		r.Header.Set(sandboxIDHeader, id)
		r.Header.Set(sandboxPortHeader, port)
		r.Header.Set("Authorization", authz)
		if gotID, gotPort, err := target(r); err == nil && (gotID == "" || gotPort < 1 || gotPort > 65535 || len(gotID) > 128) {
			t.Errorf("target accepted id %q port %d", gotID, gotPort)
		}
		_ = checkSignature(path, "read", "", "tok", sig, exp, time.Unix(0, 0))
		_, _ = userOf(r.Header)
	})
}

// FuzzSignedString: two different requests never share the signed string
// (so never a signature): whatever the fields, an accepted string reads
// back, from the right, as exactly the fields it was made of.
func FuzzSignedString(f *testing.F) {
	f.Add("/a:read", "write", "x", "abc123", "1800000060")
	f.Add("/home/user/a.txt", "read", "", "00ff", "1")
	f.Fuzz(func(t *testing.T, path, op, user, token, exp string) {
		raw, ok := signedString(path, op, user, token, exp)
		if !ok {
			return
		}
		rest, e, _ := cutLast(raw)
		rest, tok, _ := cutLast(rest)
		rest, u, _ := cutLast(rest)
		p, o, _ := cutLast(rest)
		if p != path || o != op || u != user || tok != token || e != exp {
			t.Fatalf("%q re-reads as (%q %q %q %q %q), not (%q %q %q %q %q)", raw, p, o, u, tok, e, path, op, user, token, exp)
		}
	})
}

func cutLast(s string) (string, string, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", s, false
	}
	return s[:i], s[i+1:], true
}
