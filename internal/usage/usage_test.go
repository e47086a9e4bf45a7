package usage

import (
	"math"
	"testing"
	"time"
)

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %g, want %g", what, got, want)
	}
}

func TestAccount(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := NewAccount(Request{CPU: 0.5, MemoryBytes: 2 * gib, DiskQuotaBytes: 100}, t0)
	// 10 s at one full core: 10 CPU-s, 5 of them above the 0.5 request.
	a.Observe(Reading{Time: t0.Add(10 * time.Second), CPUNanos: 10e9, MemoryBytes: gib, DiskBytes: 40, NetInBytes: 100, NetOutBytes: 7})
	// 10 s idle at half a GiB.
	a.Observe(Reading{Time: t0.Add(20 * time.Second), CPUNanos: 10e9, MemoryBytes: gib / 2, DiskBytes: 30, NetInBytes: 150, NetOutBytes: 7})
	// A reading from the past is ignored.
	a.Observe(Reading{Time: t0.Add(5 * time.Second), CPUNanos: 99e9})
	// Paused 30 s, then resumed with the CPU counter from zero (a
	// recreated cgroup); the link's counters go on.
	a.Skip(t0.Add(50 * time.Second))
	a.CPURestarted()
	a.Observe(Reading{Time: t0.Add(52 * time.Second), CPUNanos: 1e9, MemoryBytes: gib, NetInBytes: 160})
	got := a.Totals(22*time.Second, 30*time.Second)
	near(t, "cpu", got.CPUSeconds, 11)
	near(t, "burst", got.CPUBurstSeconds, 5)
	near(t, "mem used", got.MemoryUsedGiBSeconds, 10+5+2)
	near(t, "mem requested", got.MemoryRequestedGiBSeconds, 44)
	if got.MemoryPeakBytes != gib || math.Abs(float64(got.MemoryAvgBytes)-17.0/22*gib) > 1 {
		t.Errorf("peak %d avg %d", got.MemoryPeakBytes, got.MemoryAvgBytes)
	}
	if got.NetInBytes != 160 || got.NetOutBytes != 7 || got.DiskPeakBytes != 40 || got.DiskQuotaBytes != 100 {
		t.Errorf("net %d/%d disk %d/%d", got.NetInBytes, got.NetOutBytes, got.DiskPeakBytes, got.DiskQuotaBytes)
	}
	near(t, "running", got.RunningSeconds, 22)
	near(t, "paused", got.PausedSeconds, 30)
}

func TestCounterReset(t *testing.T) {
	t0 := time.Unix(0, 0)
	a := NewAccount(Request{CPU: 1}, t0)
	a.Observe(Reading{Time: t0.Add(time.Second), CPUNanos: 5e8, NetOutBytes: 1000})
	// A counter that went backwards was reset: it counts from zero.
	a.Observe(Reading{Time: t0.Add(2 * time.Second), CPUNanos: 2e8, NetOutBytes: 300})
	got := a.Totals(2*time.Second, 0)
	near(t, "cpu", got.CPUSeconds, 0.7)
	if got.NetOutBytes != 1300 || got.CPUBurstSeconds != 0 {
		t.Errorf("net out %d burst %g", got.NetOutBytes, got.CPUBurstSeconds)
	}
}

func TestGroupBy(t *testing.T) {
	recs := []Record{
		{SandboxID: "a", Runtime: "gvisor", Tags: map[string]string{"team": "x"}, Totals: Totals{CPUSeconds: 1, RunningSeconds: 10, MemoryUsedGiBSeconds: 10, MemoryPeakBytes: 5, NetInBytes: 1}},
		{SandboxID: "b", Runtime: "vm", Tags: map[string]string{"team": "x"}, Totals: Totals{CPUSeconds: 3, RunningSeconds: 10, MemoryPeakBytes: 9, NetInBytes: 2}},
		{SandboxID: "c", Runtime: "vm", Totals: Totals{CPUSeconds: 2}},
	}
	for _, tc := range []struct {
		by   string
		keys []string
		n    []int
	}{
		{"", []string{""}, []int{3}},
		{"sandbox", []string{"b", "c", "a"}, []int{1, 1, 1}},
		{"runtime", []string{"vm", "gvisor"}, []int{2, 1}},
		{"tag:team", []string{"x", ""}, []int{2, 1}},
	} {
		t.Run(tc.by, func(t *testing.T) {
			if err := ParseBy(tc.by); err != nil {
				t.Fatal(err)
			}
			gs := GroupBy(recs, tc.by)
			if len(gs) != len(tc.keys) {
				t.Fatalf("groups %+v", gs)
			}
			for i, g := range gs {
				if g.Key != tc.keys[i] || g.Sandboxes != tc.n[i] {
					t.Errorf("group %d: %q/%d, want %q/%d", i, g.Key, g.Sandboxes, tc.keys[i], tc.n[i])
				}
			}
		})
	}
	x := GroupBy(recs, "tag:team")[0].Totals
	if x.CPUSeconds != 4 || x.MemoryPeakBytes != 9 || x.NetInBytes != 3 || x.MemoryAvgBytes != gib/2 {
		t.Errorf("team x: %+v", x)
	}
	for _, bad := range []string{"tag:", "team", "tag", "Runtime"} {
		if ParseBy(bad) == nil {
			t.Errorf("ParseBy(%q) accepted", bad)
		}
	}
}

func TestBaseline(t *testing.T) {
	t0 := time.Unix(0, 0)
	a := NewAccount(Request{CPU: 1}, t0)
	a.Baseline(Reading{Time: t0.Add(time.Second), CPUNanos: 5e9, NetInBytes: 100})
	a.Observe(Reading{Time: t0.Add(2 * time.Second), CPUNanos: 6e9, NetInBytes: 150})
	got := a.Totals(time.Second, 0)
	near(t, "cpu", got.CPUSeconds, 1)
	if got.NetInBytes != 50 {
		t.Errorf("net in %d", got.NetInBytes)
	}
}
