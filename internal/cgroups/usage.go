package cgroups

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Usage is a cheap snapshot of what a group consumes. A field is zero when
// its controller is not available.
type Usage struct {
	CPUNanos    uint64 // total CPU time used
	MemoryBytes uint64 // memory charged now (page cache included)
	Pids        uint64 // tasks now
}

// ReadUsage reads group's CPU time, memory and task count from the
// controller files (a handful of small reads, no walking).
func ReadUsage(group string) (Usage, error) {
	var u Usage
	g, err := clean(group)
	if err != nil {
		return u, err
	}
	if Detect() == V2 {
		d := filepath.Join(Root, g)
		if _, err := os.Stat(d); err != nil {
			return u, fmt.Errorf("reading usage of cgroup %s: %w", group, err)
		}
		if usec, ok := statField(filepath.Join(d, "cpu.stat"), "usage_usec"); ok {
			u.CPUNanos = usec * 1000
		}
		u.MemoryBytes, _ = readUint(filepath.Join(d, "memory.current"))
		u.Pids, _ = readUint(filepath.Join(d, "pids.current"))
		return u, nil
	}
	read := func(ctrl, file string) uint64 {
		d, derr := Dir(group, ctrl)
		if derr != nil {
			return 0
		}
		v, rerr := readUint(filepath.Join(d, file))
		if rerr != nil && err == nil && !os.IsNotExist(rerr) {
			err = rerr
		}
		return v
	}
	if d, derr := Dir(group, "memory"); derr == nil {
		if _, serr := os.Stat(d); serr != nil {
			return u, fmt.Errorf("reading usage of cgroup %s: %w", group, serr)
		}
	}
	u.CPUNanos = read("cpuacct", "cpuacct.usage")
	u.MemoryBytes = read("memory", "memory.usage_in_bytes")
	u.Pids = read("pids", "pids.current")
	if err != nil {
		return u, fmt.Errorf("reading usage of cgroup %s: %w", group, err)
	}
	return u, nil
}

// readUint reads a file holding one decimal number ("max" reads as 0).
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// statField returns the value of key in a flat-keyed file such as cpu.stat.
func statField(path, key string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// splitPath splits a clean absolute path into its elements.
func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

// fieldsOf splits a whitespace-separated file body.
func fieldsOf(b []byte) []string { return strings.Fields(string(b)) }
