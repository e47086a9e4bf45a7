package envd

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestCheckSignature(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const tok = "token"
	// The e2b SDK signs "<path>:<op>:<user>:<token>[:<exp>]" (user "" when
	// unset); these signatures were computed with the SDK's getSignature.
	sig := Sign("/home/user/a.txt:read::token:1800000060")
	tests := []struct {
		name, path, op, user, sig, exp, want string
	}{
		{"good", "/home/user/a.txt", "read", "", sig, "1800000060", ""},
		{"no expiry", "/a", "write", "user", Sign("/a:write:user:token"), "", ""},
		{"expired", "/a", "read", "", Sign("/a:read::token:1799999999"), "1799999999", msgExpired},
		{"forged and expired", "/a", "read", "", "v1_forged", "1799999999", msgInvalidSignature},
		{"other op", "/home/user/a.txt", "write", "", sig, "1800000060", msgInvalidSignature},
		{"other user", "/home/user/a.txt", "read", "root", sig, "1800000060", msgInvalidSignature},
		{"other expiry", "/home/user/a.txt", "read", "", sig, "1900000000", msgInvalidSignature},
		{"bad expiry", "/a", "read", "", sig, "soon", msgBadExpiration},
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
