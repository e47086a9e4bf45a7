package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// sandboxDirs lists the daemon's sandbox directories (pooled ones too).
func (d *daemon) sandboxDirs() []string {
	ents, _ := os.ReadDir(filepath.Join(d.state, "sandboxes"))
	var ids []string
	for _, e := range ents {
		ids = append(ids, e.Name())
	}
	return ids
}

// With a warm pool, a create hands out a started sandbox, which takes on
// the caller's env, name and network policy; 50 creates in parallel all
// succeed, and nothing leaks.
func TestWarmPoolCreates(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--warm-pool", "2")
	d.poolReady(2)
	pooled := d.sandboxDirs()
	if len(pooled) != 2 {
		t.Fatalf("the pool holds %d sandboxes, want 2", len(pooled))
	}
	if out := d.mustCLI("ls"); strings.Contains(out, pooled[0]) {
		t.Errorf("ls shows a pooled sandbox:\n%s", out)
	}
	id := d.create("--name", "warm", "--env", "GREETING=hi", "--block-network")
	if !slices.Contains(pooled, id) {
		t.Errorf("create made %s, not one of the pooled %v", id, pooled)
	}
	if out := d.mustCLI("exec", id, "--", "sh", "-c", "echo $GREETING"); out != "hi\n" {
		t.Errorf("env of the claimed sandbox: %q", out)
	}
	if out := d.curl(id, "http://"+inetAddr+"/"); out != "" {
		t.Errorf("the claimed sandbox ignores --block-network: %q", out)
	}
	if out := d.mustCLI("ls"); !strings.Contains(out, "warm") {
		t.Errorf("ls lacks the claimed sandbox:\n%s", out)
	}

	var mu sync.Mutex
	ids := []string{id}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errs, code := d.cli("", "create", "--env", "N="+string(rune('a'+i%26)))
			if code != 0 {
				t.Errorf("create %d: exit %d: %s", i, code, errs)
				return
			}
			mu.Lock()
			ids = append(ids, strings.TrimSpace(out))
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if _, errs, code := d.cli("", "rm", id); code != 0 {
			t.Errorf("rm %s: %s", id, errs)
		}
	}
	d.assertNoLeaks(t, ids)
}

// poolReady waits until the daemon reports n ready pooled sandboxes.
func (d *daemon) poolReady(n int) {
	d.t.Helper()
	d.poolReadyWithin(n, 30*time.Second)
}

// poolReadyWithin is poolReady with a deadline of its own.
func (d *daemon) poolReadyWithin(n int, within time.Duration) {
	d.t.Helper()
	waitFor(d.t, within, fmt.Sprintf("the warm pool to reach %d ready sandboxes", n), func() bool {
		_, body := d.api("GET", "/v1/version", d.token, "")
		var v apiv1.Version
		return json.Unmarshal([]byte(body), &v) == nil && v.WarmPool != nil && v.WarmPool.Ready == n
	})
}

// A daemon left to its defaults keeps a warm pool sized from the machine,
// reports its hits and misses, and a plain create takes from it.
func TestDefaultWarmPool(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--warm-pool", "-1")
	want := min(max(runtime.NumCPU(), 1), 8)
	d.poolReady(want)
	pooled := d.sandboxDirs()
	id := d.create()
	if !slices.Contains(pooled, id) {
		t.Errorf("a default create made %s, not one of the pooled %v", id, pooled)
	}
	_, body := d.api("GET", "/v1/version", d.token, "")
	var v apiv1.Version
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.WarmPool == nil || v.WarmPool.Size != want || v.WarmPool.Hits != 1 {
		t.Fatalf("version: %s (%v), want a pool of %d with 1 hit", body, err, want)
	}
	d.mustCLI("rm", id)
}

// A vm warm pool boots its first guest cold, snapshots it as the pool's
// template and refills by restoring copies of it (each with its own
// identity); a restarted daemon refills from the same template.
func TestVMWarmPoolRefillsFromTemplate(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--warm-pool-spec", "size=1,runtime=vm")
	d.poolReadyWithin(1, 3*time.Minute)
	first := d.create("--runtime", "vm")
	d.poolReadyWithin(1, 3*time.Minute)
	tmpl := d.poolTemplate(t)
	second := d.create("--runtime", "vm")
	var rec apiv1.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("inspect", second)), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.FromSnapshot != tmpl {
		t.Errorf("the refilled sandbox comes from %q, not the pool's template %s", rec.FromSnapshot, tmpl)
	}
	a, b := d.mustCLI("exec", first, "--", "hostname"), d.mustCLI("exec", second, "--", "hostname")
	if a != first+"\n" || b != second+"\n" {
		t.Errorf("hostnames %q and %q, want the sandboxes' ids", a, b)
	}
	d.mustCLI("rm", first, second)

	d.stop()
	d.start()
	d.poolReadyWithin(1, 3*time.Minute)
	if again := d.poolTemplate(t); again != tmpl {
		t.Errorf("after a restart the pool's template is %s, not the earlier %s", again, tmpl)
	}
}

// poolTemplate is the id of the one warm pool template the daemon lists.
func (d *daemon) poolTemplate(t *testing.T) string {
	t.Helper()
	snaps, err := d.client.Snapshots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range snaps {
		if strings.HasPrefix(s.Name, "corral.pool-vm-") {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("pool templates: %v, want one", snaps)
	}
	return ids[0]
}
