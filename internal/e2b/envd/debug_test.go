package envd

import "testing"

// The debug sandbox (no access token) is served only on loopback.
func TestDebugListenOK(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:49983": true, "localhost:49983": true, "[::1]:49983": true, "127.3.4.5:1": true,
		"0.0.0.0:49983": false, ":49983": false, "10.0.0.1:49983": false, "[::]:49983": false,
		"example.com:49983": false, "": false, "127.0.0.1": false,
	} {
		if got := DebugListenOK(addr); got != want {
			t.Errorf("DebugListenOK(%q) = %v, want %v", addr, got, want)
		}
	}
}
