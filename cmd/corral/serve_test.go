package main

import (
	"io"
	"strings"
	"testing"
)

// TestServeRefusesSharedPortsParent: corral serve will not start with a
// ports domain under the console's registrable domain, and says why and
// how to fix it, before it touches the state directory.
func TestServeRefusesSharedPortsParent(t *testing.T) {
	t.Setenv(clusterDBEnv, "")
	cmd := newServeCmd()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	// --base-rootfs points nowhere: were the check to pass, the daemon
	// would stop there rather than start.
	cmd.SetArgs([]string{"--state-dir", t.TempDir(), "--base-rootfs", "/nonexistent", "--listen", "127.0.0.1:0", "--envd-listen", "",
		"--ports-listen", "127.0.0.1:0", "--ports-domain", "ports.example.com", "--console-host", "corral.example.com"})
	err := cmd.Execute()
	for _, want := range []string{"ports.example.com", "corral.example.com", "share the registrable domain example.com", "a registrable domain of their own", "--ports-domain-shared-parent-ok"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("corral serve: %v, want an error saying %q", err, want)
		}
	}
}
