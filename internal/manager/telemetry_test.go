package manager

import (
	"context"
	"sync"
	"testing"
	"time"

	"corral/internal/sandbox"
	"corral/internal/telemetry"
)

// The manager's hooks move the series: creates by source, a failure by
// reason, time to interactive, exec start, and the gauges' state.
func TestTelemetryHooks(t *testing.T) {
	tel := telemetry.New("test", sandbox.Runtimes)
	e := newEnvWith(t, func(c *Config) {
		c.Telemetry = tel
		c.WarmPools = []WarmPoolConfig{{Size: 1}}
	})
	tel.Observe(e.m.TelemetryState)
	e.poolReady(1)
	// Waiting in the pool is not a live sandbox of the gauge.
	if got := tel.Read("corral_sandboxes", map[string]string{"state": "running"}); got != 0 {
		t.Errorf("running before any create = %v", got)
	}
	pooled := e.create(sandbox.Spec{})
	cold := e.create(sandbox.Spec{MemoryMB: 700})
	if _, err := e.m.Create(context.Background(), sandbox.Spec{Runtime: "no-such-runtime"}); err == nil {
		t.Fatal("a create of an unknown runtime succeeded")
	}
	if out, _ := e.run(cold.ID, "echo", "x"); out != "x\n" {
		t.Fatalf("exec: %q", out)
	}
	e.poolReady(1)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"corral_sandbox_creates_total", map[string]string{"runtime": "gvisor", "source": "pool"}, 1},
		{"corral_sandbox_creates_total", map[string]string{"runtime": "gvisor", "source": "cold"}, 1},
		{"corral_sandbox_create_failures_total", map[string]string{"runtime": "other"}, 1},
		{"corral_sandbox_time_to_interactive_seconds", map[string]string{"runtime": "gvisor"}, 2},
		{"corral_exec_start_latency_seconds", map[string]string{"runtime": "gvisor"}, 1},
		{"corral_sandboxes", map[string]string{"state": "running", "runtime": "gvisor"}, 2},
		{"corral_sandboxes", map[string]string{"state": "paused", "runtime": "vm"}, 0},
		{"corral_warm_pool_hits_total", nil, 1},
		{"corral_warm_pool_misses_total", nil, 0}, // the cold create did not fit the pool
		{"corral_warm_pool_size", nil, 1},
	} {
		if got := tel.Read(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, err := e.m.Pause(context.Background(), pooled.ID); err == nil {
		if got := tel.Read("corral_sandboxes", map[string]string{"state": "paused", "runtime": "gvisor"}); got != 1 {
			t.Errorf("paused = %v", got)
		}
	}
	for _, id := range []string{pooled.ID, cold.ID} {
		if _, err := e.m.Terminate(context.Background(), id, sandbox.EndTerminated, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := tel.Read("corral_sandboxes", nil); got != 0 {
		t.Errorf("live sandboxes after terminate = %v", got)
	}
}

// The store reports each operation's latency to its observer.
func TestStoreObserver(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	seen := map[string]int{}
	e.store.SetObserver(func(op string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if d < 0 {
			t.Errorf("%s: negative latency", op)
		}
		seen[op]++
	})
	sb := e.create(sandbox.Spec{})
	if _, err := e.store.GetSandbox(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["put_sandbox"] == 0 || seen["get_sandbox"] != 1 {
		t.Errorf("observed %v", seen)
	}
}
