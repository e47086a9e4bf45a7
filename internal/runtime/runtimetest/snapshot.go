package runtimetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/ids"
	"corral/internal/runtime"
)

// testSnapshotCopies: two sandboxes started from one memory snapshot each
// have the original's files and running processes, their own changes, and
// (once the agent gave them an identity) their own hostname, machine id
// and random stream; the original runs on.
func testSnapshotCopies(t *testing.T, e Env, sn runtime.Snapshotter) {
	res := runtime.Resources{MemoryLimitMB: 512}
	s := start(t, e, res)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if got := run(t, s, agentapi.StartRequest{Args: []string{"sh", "-c", "echo parent > /root/state"}}, ""); got.code != 0 {
		t.Fatalf("writing: %+v", got)
	}
	counter := `i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done`
	run(t, s, agentapi.StartRequest{Args: []string{"sh", "-c", "setsid sh -c '" + counter + "' </dev/null >/dev/null 2>&1 &"}}, "")
	time.Sleep(500 * time.Millisecond)
	if err := s.client.EndSession(ctx); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.Dir, s.ref.ID+"-snap")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := sn.SaveSnapshot(ctx, s.ref, dir); err != nil {
		t.Fatal(err)
	}
	s.client = reconnect(t, e, s.ref)
	if st, err := e.Runtime.Status(ctx, s.ref); err != nil || st != runtime.StateRunning {
		t.Fatalf("original after the snapshot: %q %v", st, err)
	}

	var copies []*sandbox
	for i := range 2 {
		id := ids.NewSandbox()
		ref := runtime.Ref{ID: id, Dir: filepath.Join(e.Dir, id)}
		p := runtime.StartParams{Ref: ref, RootFS: e.RootFS, AgentBinary: e.AgentBinary, Resources: res, Hostname: id}
		if err := sn.StartFromSnapshot(ctx, p, dir); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		t.Cleanup(func() {
			if err := e.Runtime.Destroy(context.Background(), ref); err != nil {
				t.Errorf("destroying %s: %v", id, err)
			}
			if e.Leftovers != nil {
				if left := e.Leftovers(ref); len(left) > 0 {
					t.Errorf("%s left behind: %v", id, left)
				}
			}
		})
		c := &sandbox{ref: ref, client: reconnect(t, e, ref)}
		entropy := make([]byte, 64)
		rand.Read(entropy)
		mid := fmt.Sprintf("%032x", time.Now().UnixNano()+int64(i))
		bootID := fmt.Sprintf("0000000%d-1111-2222-3333-%012d", i, time.Now().UnixNano()%1e12)
		got, err := c.client.Identity(ctx, agentapi.IdentityRequest{Hostname: id, MachineID: mid, Entropy: entropy, BootID: bootID})
		if err != nil {
			t.Fatalf("identity of copy %d: %v", i, err)
		}
		if got.RNG == "" {
			t.Errorf("copy %d: the agent did not reseed the RNG: %+v", i, got)
		}
		// The agent shows the boot_id (vm), or the runtime does (gvisor:
		// the agent may not mount).
		if !got.BootID {
			bs, ok := e.Runtime.(runtime.BootIDSetter)
			if !ok {
				t.Fatalf("copy %d: neither the agent nor the runtime gives it a boot_id of its own", i)
			}
			if err := bs.SetBootID(ctx, ref, bootID); err != nil {
				t.Fatalf("copy %d: SetBootID: %v", i, err)
			}
		}
		if b := run(t, c, agentapi.StartRequest{Args: []string{"cat", "/proc/sys/kernel/random/boot_id"}}, ""); strings.TrimSpace(b.stdout) != bootID {
			t.Errorf("copy %d: boot_id %q, want %q", i, b.stdout, bootID)
		}
		if b := run(t, c, agentapi.StartRequest{Args: []string{"sh", "-c", "ls -A /.corral"}}, ""); strings.Contains(b.stdout, "boot_id") {
			t.Errorf("copy %d: the boot_id's file is left in /.corral: %q", i, b.stdout)
		}
		t.Logf("copy %d identity: %+v", i, got)
		copies = append(copies, c)
	}
	if got := run(t, copies[0], agentapi.StartRequest{Args: []string{"sh", "-c", "echo changed > /root/state"}}, ""); got.code != 0 {
		t.Fatalf("changing copy 0: %+v", got)
	}
	seen := map[string]string{}
	for i, c := range copies {
		want := "parent"
		if i == 0 {
			want = "changed"
		}
		if got := run(t, c, agentapi.StartRequest{Args: []string{"cat", "/root/state"}}, ""); strings.TrimSpace(got.stdout) != want {
			t.Errorf("copy %d reads %q, want %q", i, got.stdout, want)
		}
		if a, b := countRunsOn(t, c); b <= a {
			t.Errorf("copy %d: the counter does not run on (%d then %d)", i, a, b)
		}
		got := run(t, c, agentapi.StartRequest{Args: []string{"sh", "-c", "hostname; cat /etc/machine-id; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'"}}, "")
		lines := strings.Split(strings.TrimSpace(got.stdout), "\n")
		if len(lines) != 3 || lines[0] != c.ref.ID {
			t.Fatalf("copy %d identity: %+v", i, got)
		}
		for _, v := range lines[1:] {
			if prev, dup := seen[v]; dup {
				t.Errorf("copy %d shares %q with %s", i, v, prev)
			}
			seen[v] = c.ref.ID
		}
	}
	if got := run(t, s, agentapi.StartRequest{Args: []string{"cat", "/root/state"}}, ""); strings.TrimSpace(got.stdout) != "parent" {
		t.Errorf("the original reads %q after a copy changed its file", got.stdout)
	}
}
