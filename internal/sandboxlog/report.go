package sandboxlog

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxReportBytes bounds a fold report's fields: TopKeys keys and
// evidenceKeys protected destinations of at most maxKey bytes each, the
// kinds, and a few numbers.
const MaxReportBytes = (TopKeys+evidenceKeys)*(maxKey+16) + 2048

// report is one ended window's folds for one sandbox.
type report struct {
	sandbox        string
	start          time.Time
	window         time.Duration
	folded         int
	kinds          map[string]int
	top            []counter
	othersFolded   int // folded under keys the top does not name
	protected      map[string]int
	protectedOther int
}

func (w *window) report(id string, now time.Time) report {
	r := report{sandbox: id, start: w.start, window: now.Sub(w.start), folded: w.folded, kinds: w.kinds,
		top: w.keys.top(TopKeys), protected: w.protected, protectedOther: w.protectedOther}
	named := 0
	for _, c := range r.top {
		named += c.n - c.over
	}
	ordinary := w.folded - w.protectedOther
	for _, n := range w.protected {
		ordinary -= n
	}
	r.othersFolded = max(0, ordinary-named)
	return r
}

// event is the report's limit_reached event: its message and fields.
func (r report) event() (string, map[string]string) {
	secs := int(r.window.Round(time.Second) / time.Second)
	kinds := joinCounts(r.kinds)
	var top []string
	for _, c := range r.top {
		n := "×" + strconv.Itoa(c.n)
		if c.over > 0 { // space-saving's overestimate: between n-over and n
			n = fmt.Sprintf("×%d–%d", c.n-c.over, c.n)
		}
		top = append(top, c.key+" "+n)
	}
	if r.othersFolded > 0 {
		top = append(top, fmt.Sprintf("others ×%d", r.othersFolded))
	}
	protected := joinCounts(r.protected)
	if r.protectedOther > 0 {
		protected += fmt.Sprintf("; other protected destinations ×%d", r.protectedOther)
	}
	msg := fmt.Sprintf("records past %d a second (burst %d) folded: %d in %d s (%s)", Rate, Burst, r.folded, secs, kinds)
	if len(top) > 0 {
		msg += ": " + strings.Join(top, "; ")
	}
	f := map[string]string{
		"resource": "trail", "limit": "per_sandbox", "max": strconv.Itoa(Rate), "burst": strconv.Itoa(Burst),
		"folded": strconv.Itoa(r.folded), "since": r.start.UTC().Format(time.RFC3339Nano),
		"seconds": strconv.Itoa(secs), "kinds": kinds, "top": strings.Join(top, "; "),
	}
	if protected != "" {
		f["protected"] = strings.TrimPrefix(protected, "; ")
		msg += "; protected destinations denied: " + f["protected"]
	}
	return msg, f
}

// joinCounts is "key ×n; ..." most counted first (ties by key).
func joinCounts(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " ×" + strconv.Itoa(m[k])
	}
	return strings.Join(parts, "; ")
}
