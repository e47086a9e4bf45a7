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
// resolver).
func writeResolvConf(root string, servers []netip.Addr) error {
	var b strings.Builder
	b.WriteString("# written by the corral agent: the daemon's resolver\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	return writeEtcFile(root, agentapi.ResolvConf, agentapi.ResolvConfTemp, b.String())
}

// writeEtcFile replaces the file at path (in /etc) with content,
// atomically inside root, never following a symlink out of it. The
// temporary name is fixed (the agent writes these files at start and on a
// new identity), so that a runtime exporting the sandbox's changes knows
// both names to leave out: agentapi.RuntimeWrittenFiles.
func writeEtcFile(root, path, tmpName, content string) error {
	etc, err := fspath.Resolve(root, filepath.Dir(path))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	tmpPath := filepath.Join(etc, filepath.Base(tmpName))
	tmp, err := os.OpenFile(tmpPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(tmpPath)
	if _, err := tmp.WriteString(content); err != nil {
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
	return os.Rename(tmpPath, filepath.Join(etc, filepath.Base(path)))
}
