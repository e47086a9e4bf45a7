package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs url (with token, when not empty) and parses the answer with
// Prometheus' own text parser; it returns the status and the families.
func scrape(t *testing.T, url, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return resp.StatusCode, fams
}

// sample is the value of the series of fams' name whose labels include
// labels, summed: a counter's or gauge's value, a histogram's count.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		n := 0
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				n++
			}
		}
		if n != len(labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// /metrics behind the token, its series moving with a create, an exec and
// DNS decisions; then, restarted with --metrics-listen, only there and
// without the token. And an API error's request id found in the daemon's
// JSON log.
func TestPrometheusMetrics(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--dns-upstream", fakeDNS(t))
	url := "http://" + d.addr + "/metrics"
	if code, _ := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %d", code)
	}
	if code, _ := scrape(t, url, "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong token: %d", code)
	}
	code, before := scrape(t, url, d.token)
	if code != http.StatusOK {
		t.Fatalf("/metrics with the token: %d", code)
	}
	for _, name := range []string{"corral_sandboxes", "corral_agent_reconnects_total", "corral_build_info",
		"corral_store_latency_seconds", "go_goroutines", "process_resident_memory_bytes"} {
		if before[name] == nil {
			t.Errorf("series %s missing", name)
		}
	}
	for name := range before {
		if !strings.HasPrefix(name, "corral_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			t.Errorf("series %s is not corral_ (nor the Go or process collector's)", name)
		}
	}

	id := d.create("--domain-allow", "allowed.test")
	d.mustCLI("exec", id, "--", "getent", "hosts", "allowed.test")
	d.cli("", "exec", id, "--", "getent", "hosts", "denied.test") // refused: exits 2
	gv := map[string]string{"runtime": "gvisor"}
	running := map[string]string{"runtime": "gvisor", "state": "running"}
	var after map[string]*dto.MetricFamily
	// The decisions reach the counter as the resolver reports them.
	if !poll(10*time.Second, func() bool {
		_, after = scrape(t, url, d.token)
		return sample(after, "corral_egress_decisions_total", map[string]string{"decision": "denied", "via": "dns"}) >= 1 &&
			sample(after, "corral_egress_decisions_total", map[string]string{"decision": "allowed", "via": "dns"}) >= 1
	}) {
		t.Fatalf("no allowed and denied dns decisions counted: %v", after["corral_egress_decisions_total"])
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		delta  float64
	}{
		{"corral_sandbox_creates_total", map[string]string{"runtime": "gvisor", "source": "cold"}, 1},
		{"corral_sandbox_time_to_interactive_seconds", gv, 1},
		{"corral_exec_start_latency_seconds", gv, 2},
		{"corral_sandboxes", running, 1},
	} {
		if got := sample(after, c.name, c.labels) - sample(before, c.name, c.labels); got != c.delta {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, got, c.delta)
		}
	}
	if sample(after, "corral_store_latency_seconds", nil) <= sample(before, "corral_store_latency_seconds", nil) {
		t.Error("the store latency histogram did not move")
	}

	// An API error's request id is in the body, the header and the log.
	status, body := d.api("GET", "/v1/sandboxes/sb-doesnotexist0", d.token, "")
	var e struct {
		Error struct {
			Code      string
			RequestID string `json:"request_id"`
		}
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || status != http.StatusNotFound || e.Error.RequestID == "" {
		t.Fatalf("error answer %d %s", status, body)
	}
	// The request's log line is written once its answer is sent: the
	// answer may reach us first.
	if !poll(10*time.Second, func() bool { return loggedJSON(d.log.String(), e.Error.RequestID) }) {
		t.Errorf("request id %s not in the daemon's JSON log", e.Error.RequestID)
	}

	// Restarted with --metrics-listen: /metrics there without a token, and
	// gone from the API listener; the adopted sandbox still counted.
	d.stop()
	d.net = append(d.net, "--metrics-listen", d.slot.loopback(portMetrics))
	d.start()
	maddr := d.flag("--metrics-listen")
	if code, _ := scrape(t, url, d.token); code != http.StatusNotFound {
		t.Errorf("/metrics on the API listener with --metrics-listen: %d", code)
	}
	code, sep := scrape(t, "http://"+maddr+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics on --metrics-listen: %d", code)
	}
	if got := sample(sep, "corral_sandboxes", running); got != 1 {
		t.Errorf("running sandboxes after the restart: %v", got)
	}
}

// loggedJSON reports whether a line of the log is a JSON object whose
// request_id is id.
func loggedJSON(log, id string) bool {
	for _, l := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["request_id"] == id {
			return true
		}
	}
	return false
}
