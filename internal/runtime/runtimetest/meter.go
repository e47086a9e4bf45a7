package runtimetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/runtime"
)

// testMeter checks a runtime.Meter against what the guest does: CPU time
// grows by about what a busy second burns, memory is held, and a file
// written into the private layer shows in the disk figure.
func testMeter(t *testing.T, e Env, m runtime.Meter) {
	s := start(t, e, runtime.Resources{MemoryLimitMB: 512, DiskMB: 1024})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before, err := m.Usage(ctx, s.ref)
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, agentapi.StartRequest{Args: []string{"sh", "-c", "end=$(($(date +%s)+2)); while [ $(date +%s) -lt $end ]; do :; done"}}, "")
	if _, err := s.client.WriteFile(ctx, "/root/metered", bytes.NewReader(bytes.Repeat([]byte("m"), 32<<20)), 0o644, ""); err != nil {
		t.Fatal(err)
	}
	run(t, s, agentapi.StartRequest{Args: []string{"sync"}}, "")
	after, err := m.Usage(ctx, s.ref)
	if err != nil {
		t.Fatal(err)
	}
	if after.CPUNanos < before.CPUNanos+500e6 {
		t.Errorf("CPU %d -> %d ns across a busy second or more", before.CPUNanos, after.CPUNanos)
	}
	if after.MemoryBytes == 0 {
		t.Errorf("no memory in use: %+v", after)
	}
	if after.DiskBytes < before.DiskBytes+30<<20 {
		t.Errorf("disk %d -> %d bytes across a 32 MiB file", before.DiskBytes, after.DiskBytes)
	}
	if err := e.Runtime.Destroy(ctx, s.ref); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Usage(ctx, s.ref); err == nil {
		t.Error("a destroyed sandbox still measures")
	}
}

// testWatch checks that the guest's filesystem reports changes to the
// agent's watches (inotify), on the root filesystem and on a tmpfs.
func testWatch(t *testing.T, e Env) {
	s := start(t, e, runtime.Resources{MemoryLimitMB: 512})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dir := range []string{"/root/watched", "/dev/shm/watched"} {
		run(t, s, agentapi.StartRequest{Args: []string{"mkdir", "-p", dir}}, "")
		ws, err := s.client.Watch(ctx, dir, true, "")
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		run(t, s, agentapi.StartRequest{Args: []string{"sh", "-c", "mkdir " + dir + "/sub && sleep 0.2 && echo x > " + dir + "/sub/f"}}, "")
		seen := map[string]bool{}
		for !seen["create sub/f"] {
			ev, err := ws.Recv()
			if err != nil {
				t.Fatalf("%s: %v after %v", dir, err, seen)
			}
			seen[ev.Type+" "+ev.Name] = true
		}
		ws.Close()
		if !seen["create sub"] {
			t.Errorf("%s: %v", dir, seen)
		}
	}
}
