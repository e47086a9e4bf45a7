package agent

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"corral/internal/agentapi"

	"corral/internal/fspath"
)

// writeResolvConf points the sandbox's resolver configuration at the
// daemon's resolver (the network layer redirects every DNS packet there
// anyway; this makes the file say so instead of naming the host's
// resolver). It replaces the file atomically inside root and never
// follows a symlink out of it.
func writeResolvConf(root string, servers []netip.Addr) error {
	var b strings.Builder
	b.WriteString("# written by the corral agent: the daemon's resolver\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	etc, err := fspath.Resolve(root, "/etc")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	// A fixed temporary name (the agent writes this once, at start), so
	// that a runtime exporting the sandbox's changes knows both names to
	// leave out: agentapi.RuntimeWrittenFiles.
	tmpPath := filepath.Join(etc, filepath.Base(agentapi.ResolvConfTemp))
	tmp, err := os.OpenFile(tmpPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(tmpPath)
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmpPath, filepath.Join(etc, "resolv.conf"))
}
