package usage

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Record is one sandbox's usage: settled once it ended, so far while it
// lives.
type Record struct {
	SandboxID string
	Runtime   string
	Tags      map[string]string
	StartedAt time.Time
	// EndedAt is zero while the sandbox lives.
	EndedAt time.Time
	Totals  Totals
}

// Group is the usage of the sandboxes sharing a key.
type Group struct {
	// Key is the group's value of the grouping (a tag's value, a runtime,
	// a sandbox id); "" for sandboxes without the tag, or the total.
	Key       string
	Sandboxes int
	Totals    Totals
}

// ParseBy checks a grouping: "" (one total), "sandbox", "runtime" or
// "tag:KEY".
func ParseBy(by string) error {
	switch {
	case by == "", by == "sandbox", by == "runtime":
		return nil
	case strings.HasPrefix(by, "tag:") && len(by) > len("tag:") && len(by) <= 4+128:
		return nil
	}
	return fmt.Errorf("group_by: sandbox, runtime or tag:KEY, got %q", by)
}

// key is record r's value of grouping by.
func key(r Record, by string) string {
	switch {
	case by == "sandbox":
		return r.SandboxID
	case by == "runtime":
		return r.Runtime
	case strings.HasPrefix(by, "tag:"):
		return r.Tags[strings.TrimPrefix(by, "tag:")]
	}
	return ""
}

// GroupBy adds records up by grouping by (see ParseBy), largest CPU
// first. Sums are sums; MemoryPeakBytes and DiskPeakBytes are the largest
// of the group's, MemoryAvgBytes its time-weighted average working set
// per running sandbox, DiskQuotaBytes the sum of its quotas.
func GroupBy(recs []Record, by string) []Group {
	idx := map[string]int{}
	var out []Group
	for _, r := range recs {
		k := key(r, by)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Group{Key: k})
		}
		g := &out[i]
		g.Sandboxes++
		add(&g.Totals, r.Totals)
	}
	for i := range out {
		t := &out[i].Totals
		if t.RunningSeconds > 0 {
			t.MemoryAvgBytes = uint64(t.MemoryUsedGiBSeconds / t.RunningSeconds * gib)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Totals.CPUSeconds != out[j].Totals.CPUSeconds {
			return out[i].Totals.CPUSeconds > out[j].Totals.CPUSeconds
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// add adds u to t.
func add(t *Totals, u Totals) {
	t.CPUSeconds += u.CPUSeconds
	t.CPUBurstSeconds += u.CPUBurstSeconds
	t.MemoryRequestedGiBSeconds += u.MemoryRequestedGiBSeconds
	t.MemoryUsedGiBSeconds += u.MemoryUsedGiBSeconds
	t.MemoryPeakBytes = max(t.MemoryPeakBytes, u.MemoryPeakBytes)
	t.NetInBytes += u.NetInBytes
	t.NetOutBytes += u.NetOutBytes
	t.DiskPeakBytes = max(t.DiskPeakBytes, u.DiskPeakBytes)
	t.DiskQuotaBytes += u.DiskQuotaBytes
	t.RunningSeconds += u.RunningSeconds
	t.PausedSeconds += u.PausedSeconds
}
