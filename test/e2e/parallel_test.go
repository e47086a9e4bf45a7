package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// The must-show: 100 creates at once through the API all succeed
// (cold: the spec fits no pool), each sandbox answers, and once they are
// removed nothing of them is left: no process, mount, cgroup, directory,
// network namespace, link or slot.
func TestHundredParallelCreates(t *testing.T) {
	// Not parallel: a hundred creates at once measure the daemon under load, which other tests would add to.
	const n = 100
	d := startDaemon(t, "--max-sandboxes", "128")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ids := make([]string, n)
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := d.client.Create(ctx, apiv1.CreateSandboxRequest{Tags: map[string]string{"i": fmt.Sprint(i)}})
			if err != nil {
				errs[i] = err
				return
			}
			ids[i] = sb.ID
		}()
	}
	wg.Wait()
	t.Logf("%d parallel creates took %s", n, time.Since(start).Round(time.Millisecond))
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			t.Errorf("create %d: %v", i, err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d parallel creates failed", failed, n)
	}
	for _, id := range ids {
		if out := d.mustCLI("exec", id, "--", "hostname"); out != id+"\n" {
			t.Errorf("%s answers %q", id, out)
		}
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.client.Terminate(ctx, ids[i]); err != nil {
				t.Errorf("terminate %s: %v", ids[i], err)
			}
		}()
	}
	wg.Wait()
	d.assertNoLeaks(t, ids)
	d.assertNoNetworkLeft(t)
}

// assertNoNetworkLeft fails if the daemon still has a sandbox's network:
// a link with its prefix, a namespace mount or a slot state file.
func (d *daemon) assertNoNetworkLeft(t *testing.T) {
	t.Helper()
	links, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	prefix := d.flag("--net-link-prefix")
	for _, l := range links {
		if strings.HasPrefix(l.Name, prefix) {
			t.Errorf("link %s is left", l.Name)
		}
	}
	for _, dir := range []string{"netns", "slots"} {
		ents, _ := os.ReadDir(filepath.Join(d.state, "net", dir))
		for _, e := range ents {
			t.Errorf("net/%s/%s is left", dir, e.Name())
		}
	}
}

// flag returns the value the daemon was started with for a flag (the
// last one given, which is what serve takes).
func (d *daemon) flag(name string) string {
	for i := len(d.net) - 2; i >= 0; i-- {
		if d.net[i] == name {
			return d.net[i+1]
		}
	}
	d.t.Fatalf("the daemon has no %s", name)
	return ""
}
