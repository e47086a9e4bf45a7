// Package mountinfo reads /proc/self/mountinfo fields and detaches the
// mounts under a directory. It imports nothing from Corral.
package mountinfo

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Under lists this process's mount points at or below dir, deepest first
// (the order they can be unmounted in).
func Under(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := Unescape(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	sort.SliceStable(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts, nil
}

// UnmountUnder detaches every mount at or below dir in this mount
// namespace, deepest first, but those in keep; one already gone is not an
// error.
func UnmountUnder(dir string, keep ...string) error {
	mounts, err := Under(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if slices.Contains(keep, m) {
			continue
		}
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// Unescape undoes mountinfo's octal escapes (\040 is a space, \011 a tab,
// \012 a newline, \134 a backslash).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
