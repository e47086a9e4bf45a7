package api

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/testwait"
	"corral/pkg/apiv1"
)

// A running sandbox gets samples every interval with its limits as the
// totals and its files in the disk figure; since filters; an ended
// sandbox's history is gone.
func TestAPIMetrics(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	sb := e.create(apiv1.CreateSandboxRequest{MemoryLimitMB: 256, DiskMB: 1024, CPULimit: 1.5, Name: "metered"})
	if _, err := e.c.WriteFile(ctx, sb.ID, "/blob", strings.NewReader(strings.Repeat("x", 2<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	var m *apiv1.Metrics
	testwait.For(t, 10*time.Second, "3 samples, the last counting the 2 MiB file", func() bool {
		var err error
		if m, err = e.c.Metrics(ctx, "metered", time.Time{}); err != nil {
			t.Fatal(err)
		}
		return len(m.Samples) >= 3 && m.Samples[len(m.Samples)-1].DiskUsed >= 2<<20
	})
	last := m.Samples[len(m.Samples)-1]
	if m.Interval != 0.1 || last.MemoryTotal != 256<<20 || last.DiskTotal != 1024<<20 || last.CPUCount != 1.5 ||
		last.MemoryUsed == 0 || last.CPUPercent < 0 || time.Since(last.Time) > 5*time.Second {
		t.Errorf("metrics %+v, last sample %+v", m, last)
	}
	for i := 1; i < len(m.Samples); i++ {
		if !m.Samples[i].Time.After(m.Samples[i-1].Time) {
			t.Fatalf("samples out of order: %+v", m.Samples)
		}
	}
	later, err := e.c.Metrics(ctx, sb.ID, m.Samples[len(m.Samples)-2].Time)
	if err != nil || len(later.Samples) == 0 || !later.Samples[0].Time.Equal(last.Time) {
		t.Errorf("since the one before last: %+v, %v", later, err)
	}
	unix := m.Samples[0].Time.Unix() - 1
	if status, body := e.raw("GET", "/v1/sandboxes/"+sb.ID+"/metrics?since="+strconv.FormatInt(unix, 10), ""); status != 200 || !strings.Contains(body, `"cpu_percent"`) {
		t.Errorf("since as Unix seconds: %d %s", status, body)
	}
	for _, q := range []string{"?since=yesterday", "?since=-5", "?since=NaN"} {
		if status, body := e.raw("GET", "/v1/sandboxes/"+sb.ID+"/metrics"+q, ""); status != 400 || !strings.Contains(body, "since") {
			t.Errorf("GET metrics%s: %d %s", q, status, body)
		}
	}
	if status, _ := e.raw("GET", "/v1/sandboxes/sb-aaaaaaaaaaaaaaaa/metrics", ""); status != 404 {
		t.Errorf("an unknown sandbox: %d", status)
	}
	if _, err := e.c.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// The next round forgets it.
	testwait.For(t, 5*time.Second, "the ended sandbox's samples to go", func() bool {
		m, err := e.c.Metrics(ctx, sb.ID, time.Time{})
		if err != nil {
			t.Fatalf("metrics of an ended sandbox: %v", err)
		}
		return len(m.Samples) == 0
	})
}
