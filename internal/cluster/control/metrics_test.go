package control

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// /metrics needs the token; it reports the nodes from the database and
// this instance's creates by outcome, and moves with a create.
func TestControlMetrics(t *testing.T) {
	st, _, _ := setup(t)
	srv := controlFor(t, st, testJoin)
	if status, _ := call(t, srv, "GET", "/metrics", "", ""); status != 401 {
		t.Errorf("/metrics without the token: %d, want 401", status)
	}
	if status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{"memory_mb": 1024}`); status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	if status, body := call(t, srv, "POST", "/v1/sandboxes", testToken, `{"memory_mb": 8192}`); status != 429 {
		t.Fatalf("a create too big: %d %s", status, body)
	}
	status, body := call(t, srv, "GET", "/metrics", testToken, "")
	if status != 200 {
		t.Fatalf("/metrics: %d %s", status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"corral_cluster_creates_total", map[string]string{"outcome": "placed"}, 1},
		{"corral_cluster_creates_total", map[string]string{"outcome": "refused"}, 1},
		{"corral_cluster_nodes", map[string]string{"state": "ready", "draining": "false"}, 1},
		{"corral_cluster_node_capacity", map[string]string{"node": "n1", "resource": "memory_bytes"}, 4096 << 20},
		{"corral_cluster_node_placed", map[string]string{"node": "n1", "resource": "memory_bytes"}, 1024 << 20},
		{"corral_cluster_node_placed", map[string]string{"node": "n1", "resource": "sandboxes"}, 1},
	} {
		if got, ok := sample(fams[c.name], c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if h := fams["corral_cluster_create_seconds"]; h == nil || h.Metric[0].GetHistogram().GetSampleCount() != 2 {
		t.Errorf("corral_cluster_create_seconds: %v, want 2 creates observed", h)
	}
}

// sample is the value of fam's series with labels.
func sample(fam *dto.MetricFamily, labels map[string]string) (float64, bool) {
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.Metric {
		for _, lp := range m.Label {
			if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}
