package vminit

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// loadModules loads the modules listed in list (one initramfs path per
// line). The list is in dependency order, but a module whose dependency
// is not loaded yet fails with ENOENT or EINVAL ("unknown symbol"), so
// every pass retries the failures until a pass makes no progress.
func loadModules(list string) error {
	b, err := os.ReadFile(list)
	if err != nil {
		return fmt.Errorf("reading the module list: %w", err)
	}
	pending := strings.Fields(string(b))
	for len(pending) > 0 {
		var failed []string
		var lastErr error
		for _, p := range pending {
			if err := loadModule(p); err != nil {
				failed = append(failed, p)
				lastErr = err
			}
		}
		if len(failed) == len(pending) {
			return fmt.Errorf("loading modules %v: %w", failed, lastErr)
		}
		pending = failed
	}
	return nil
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
