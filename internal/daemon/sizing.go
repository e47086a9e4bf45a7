package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Sizing of the defaults an operator leaves to the machine, from the
// density measurements in docs/BENCHMARKS.md: an idle gVisor sandbox holds
// 18-21 MiB of host memory and 26-29 host threads.
const (
	// perSandboxMem is the memory budgeted per sandbox: 1.6x the measured
	// idle footprint.
	perSandboxMem = 32 << 20
	// reservedMem is left to the host and the daemon.
	reservedMem = 2 << 30
	// perSandboxThreads is the threads budgeted per sandbox (against
	// kernel.pid_max, which bounds threads as well as processes).
	perSandboxThreads = 32
	// minMaxSandboxes is the floor of the default live-sandbox bound.
	minMaxSandboxes = 64
)

// AutoMaxSandboxes is the default live-sandbox bound: as many idle
// sandboxes as the host's memory and thread limit hold, at least 64. A
// sandbox that uses more than its idle footprint (and a vm's RAM) is the
// operator's to budget with --max-sandboxes; the bound is what the daemon
// admits, not what any workload fits.
func AutoMaxSandboxes() (int, error) {
	mem, err := memTotal()
	if err != nil {
		return 0, err
	}
	threads, err := readInt("/proc/sys/kernel/pid_max")
	if err != nil {
		return 0, err
	}
	byMem := int((mem - reservedMem) / perSandboxMem)
	return max(minMaxSandboxes, min(byMem, int(threads/perSandboxThreads))), nil
}

// memTotal is MemTotal from /proc/meminfo, in bytes.
func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kib, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading /proc/meminfo: %w", err)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("reading /proc/meminfo: no MemTotal")
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	return v, nil
}
