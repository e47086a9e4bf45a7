package netpolicy

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain sweeps what an earlier run of this package that crashed may
// have left on the host (its links cx*/ct* with a four-hex suffix, its
// tables corraltest_*, its routing rules 9001 to 9004): a stale rule 9004
// sends the host's traffic from 198.51.100.236/30 into a table whose
// default is unreachable, and stale links keep their addresses. Nothing
// else on the host uses these names.
func TestMain(m *testing.M) {
	if os.Geteuid() == 0 {
		sweepTestLeftovers()
	}
	os.Exit(m.Run())
}

func sweepTestLeftovers() {
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if isTestLink(name) {
			_ = exec.Command("ip", "link", "del", name).Run()
		}
	}
	tables, _ := exec.Command("nft", "list", "tables").Output()
	for _, line := range strings.Split(string(tables), "\n") {
		if f := strings.Fields(line); len(f) == 3 && strings.HasPrefix(f[2], "corraltest_") {
			_ = exec.Command("nft", "delete", "table", f[1], f[2]).Run()
		}
	}
	for _, prio := range []string{"9001", "9002", "9003", "9004"} {
		for exec.Command("ip", "rule", "del", "priority", prio).Run() == nil {
		}
	}
}

// isTestLink reports whether a link is one this package's tests make:
// cx or ct, four hex digits, and the rest.
func isTestLink(name string) bool {
	if len(name) < 6 || (name[:2] != "cx" && name[:2] != "ct") {
		return false
	}
	for _, c := range name[2:6] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}
