package control

import (
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// Two nodes' reports for one window become one: a group on both nodes is
// one group with the sums, the larger peaks and the average working set
// of the whole; groups by CPU, most first.
func TestMergeUsage(t *testing.T) {
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	gib := uint64(1 << 30)
	a := apiv1.UsageReport{From: from, GroupBy: "tag:team", Groups: []apiv1.UsageGroup{
		{Key: "red", Sandboxes: 2, Usage: apiv1.Usage{CPUSeconds: 10, MemoryUsedGiBSeconds: 100, RunningSeconds: 100,
			MemoryPeakBytes: 3 * gib, DiskPeakBytes: 5, DiskQuotaBytes: 10, NetInBytes: 7}},
		{Key: "", Sandboxes: 1, Usage: apiv1.Usage{CPUSeconds: 1}},
	}}
	b := apiv1.UsageReport{From: from, GroupBy: "tag:team", Groups: []apiv1.UsageGroup{
		{Key: "red", Sandboxes: 1, Usage: apiv1.Usage{CPUSeconds: 5, MemoryUsedGiBSeconds: 300, RunningSeconds: 100,
			MemoryPeakBytes: 2 * gib, DiskPeakBytes: 9, DiskQuotaBytes: 10, NetInBytes: 3, PausedSeconds: 4}},
		{Key: "blue", Sandboxes: 4, Usage: apiv1.Usage{CPUSeconds: 20}},
	}}
	got := mergeUsage([]apiv1.UsageReport{a, b})
	if got.GroupBy != "tag:team" || !got.From.Equal(from) || len(got.Groups) != 3 {
		t.Fatalf("merged report %+v", got)
	}
	if keys := [3]string{got.Groups[0].Key, got.Groups[1].Key, got.Groups[2].Key}; keys != [3]string{"blue", "red", ""} {
		t.Errorf("groups in the order %q, want blue, red, \"\" (most CPU first)", keys)
	}
	red := got.Groups[1]
	want := apiv1.UsageGroup{Key: "red", Sandboxes: 3, Usage: apiv1.Usage{CPUSeconds: 15, MemoryUsedGiBSeconds: 400, RunningSeconds: 200,
		MemoryPeakBytes: 3 * gib, MemoryAvgBytes: 2 * gib, DiskPeakBytes: 9, DiskQuotaBytes: 20, NetInBytes: 10, PausedSeconds: 4}}
	if red != want {
		t.Errorf("red merged to\n%+v, want\n%+v", red, want)
	}
	if empty := mergeUsage(nil); empty.Groups == nil || len(empty.Groups) != 0 {
		t.Errorf("no reports: %+v, want an empty list of groups", empty)
	}
}
