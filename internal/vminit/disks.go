package vminit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// findDisks waits until a virtio disk with each serial shows up and
// returns their device paths by serial.
func findDisks(wait time.Duration, serials ...string) (map[string]string, error) {
	deadline := time.Now().Add(wait)
	for {
		found := map[string]string{}
		blocks, _ := filepath.Glob("/sys/block/vd*/serial")
		for _, p := range blocks {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			found[strings.TrimSpace(string(b))] = "/dev/" + filepath.Base(filepath.Dir(p))
		}
		missing := []string{}
		for _, s := range serials {
			if found[s] == "" {
				missing = append(missing, s)
			}
		}
		if len(missing) == 0 {
			return found, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("disks %v did not appear within %s (found %v)", missing, wait, found)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
