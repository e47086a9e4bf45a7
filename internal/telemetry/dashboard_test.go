package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The sample Grafana dashboard (docs/grafana/corral.json) queries only
// series this package exports.
func TestDashboardSeries(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana/corral.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("corral.json: %v", err)
	}
	m := New("v", []string{"gvisor"})
	m.Created("gvisor", SourceCold, time.Second, false, "")
	m.Created("gvisor", SourceCold, time.Second, true, "internal")
	m.ExecStarted("gvisor", time.Millisecond)
	m.Egress(true, "dns")
	m.AgentReconnected()
	m.StoreOp("get_sandbox", time.Millisecond)
	m.Observe(func() State {
		return State{Sandboxes: []SandboxCount{{State: "running", Runtime: "gvisor"}}, Pools: []Pool{{Runtime: "gvisor", Image: "base"}}}
	})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range fams {
		exported[f.GetName()] = true
	}
	series := regexp.MustCompile(`\b(corral|go|process)_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range series.FindAllString(tg.Expr, -1) {
				n++
				if !exported[strings.TrimSuffix(name, "_bucket")] {
					t.Errorf("panel %q queries %s, which is not exported", p.Title, name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no series found in the dashboard")
	}
}
