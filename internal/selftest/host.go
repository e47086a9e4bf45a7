package selftest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The host's side of the evidence: what the host itself shows, read
// directly, never through the daemon.

// hostProcesses returns "pid: cmdline" of every host process whose command
// line holds s (this process excluded: its arguments may name what it
// looks for).
func hostProcesses(s string) []string {
	self := os.Getpid()
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cl, s) {
			out = append(out, e.Name()+": "+strings.TrimSpace(cl))
		}
	}
	return out
}

// daemonPID finds the `corral serve` process that uses stateDir.
func daemonPID(stateDir string) int {
	for _, p := range hostProcesses("serve") {
		pidStr, cl, _ := strings.Cut(p, ": ")
		if !strings.Contains(cl, "corral") && !strings.Contains(cl, "serve") {
			continue
		}
		fields := strings.Fields(cl)
		if len(fields) < 2 || fields[1] != "serve" {
			continue
		}
		dir := "/var/lib/corral"
		for i, f := range fields {
			if f == "--state-dir" && i+1 < len(fields) {
				dir = fields[i+1]
			} else if v, ok := strings.CutPrefix(f, "--state-dir="); ok {
				dir = v
			}
		}
		if filepath.Clean(dir) == filepath.Clean(stateDir) {
			pid, _ := strconv.Atoi(pidStr)
			return pid
		}
	}
	return 0
}

// statusKiB reads a "Vm…:" line of /proc/pid/status in KiB.
func statusKiB(pid int, key string) int64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// cgroupsOf lists every cgroup directory named id, in any hierarchy, at
// most three levels down.
func cgroupsOf(id string) []string {
	var out []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		for depth := 1; depth <= 3; depth++ {
			pattern := root + strings.Repeat("/*", depth-1) + "/" + id
			m, _ := filepath.Glob(pattern)
			out = append(out, m...)
		}
	}
	return out
}

// allocatedBytes sums the disk blocks of the files under p.
func allocatedBytes(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// setuidOrDevices lists the setuid/setgid files and device nodes under p.
func setuidOrDevices(p string) []string {
	var out []string
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		m := fi.Mode()
		if m&(fs.ModeSetuid|fs.ModeSetgid) != 0 || m&fs.ModeDevice != 0 {
			out = append(out, q+" "+m.String())
		}
		return nil
	})
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func readTrim(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}
