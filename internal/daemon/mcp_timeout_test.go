package daemon

import (
	"strings"
	"testing"
	"time"
)

// --mcp-max-timeout is refused below 0 and above a sandbox's longest
// lifetime, before anything is created.
func TestMCPMaxTimeoutFlag(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "--mcp-max-timeout -1s"},
		{25 * time.Hour, "--mcp-max-timeout 25h0m0s"},
	} {
		cfg := Config{StateDir: t.TempDir(), MCPMaxTimeout: tc.d}
		err := cfg.defaults()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MCPMaxTimeout %s: %v, want an error naming %q", tc.d, err, tc.want)
		}
	}
}
