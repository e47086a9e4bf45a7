package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHooks(t *testing.T) {
	m := New("v-test", []string{"gvisor", "vm"})
	m.Created("gvisor", SourceCold, 300*time.Millisecond, false, "")
	m.Created("gvisor", SourcePool, 5*time.Millisecond, false, "")
	m.Created("vm", SourceCold, time.Second, true, "unavailable")
	// A hostile runtime name must not become a series of its own.
	m.Created("x\"}{evil", SourceCold, 0, true, "invalid_argument")
	m.ExecStarted("gvisor", 2*time.Millisecond)
	m.Egress(true, "dns")
	m.Egress(false, "nftables")
	m.Egress(false, "made-up")
	m.AgentReconnected()
	m.StoreOp("put_sandbox", time.Millisecond)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"corral_sandbox_creates_total", nil, 4},
		{"corral_sandbox_creates_total", map[string]string{"runtime": "gvisor", "source": "pool"}, 1},
		{"corral_sandbox_create_failures_total", map[string]string{"runtime": "vm", "reason": "unavailable"}, 1},
		{"corral_sandbox_create_failures_total", map[string]string{"runtime": "other", "reason": "invalid_argument"}, 1},
		{"corral_sandbox_time_to_interactive_seconds", map[string]string{"runtime": "gvisor"}, 2},
		{"corral_sandbox_time_to_interactive_seconds", map[string]string{"runtime": "vm"}, 0},
		{"corral_exec_start_latency_seconds", map[string]string{"runtime": "gvisor"}, 1},
		{"corral_egress_decisions_total", map[string]string{"decision": "allowed", "via": "dns"}, 1},
		{"corral_egress_decisions_total", map[string]string{"decision": "denied"}, 2},
		{"corral_egress_decisions_total", map[string]string{"via": "other"}, 1},
		{"corral_agent_reconnects_total", nil, 1},
		{"corral_store_latency_seconds", map[string]string{"op": "put_sandbox"}, 1},
		{"corral_build_info", map[string]string{"version": "v-test"}, 1},
	} {
		if got := m.Read(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// A nil *Metrics takes every hook and records nothing.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.Created("gvisor", SourceCold, time.Second, false, "")
	m.ExecStarted("gvisor", time.Second)
	m.Egress(true, "dns")
	m.AgentReconnected()
	m.StoreOp("x", time.Second)
	m.Observe(func() State { t.Fatal("read called"); return State{} })
}

func TestObserveAndHandler(t *testing.T) {
	m := New("v", []string{"gvisor"})
	n := 0
	m.Observe(func() State {
		n++
		return State{
			Sandboxes: []SandboxCount{{State: "running", Runtime: "gvisor", N: 3}, {State: "paused", Runtime: "gvisor"}},
			Pools:     []Pool{{Runtime: "gvisor", Image: "base", Size: 2, Ready: 1, Hits: 5, Misses: 1}},
		}
	})
	if got := m.Read("corral_sandboxes", map[string]string{"state": "running"}); got != 3 {
		t.Errorf("running = %v", got)
	}
	if got := m.Read("corral_warm_pool_hits_total", map[string]string{"image": "base"}); got != 5 {
		t.Errorf("hits = %v", got)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`corral_sandboxes{runtime="gvisor",state="paused"} 0`, `corral_warm_pool_size{image="base",pool="0",runtime="gvisor"} 2`,
		"go_goroutines", "process_open_fds"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if n != 3 {
		t.Errorf("state read %d times, want once per gather (3)", n)
	}
}
