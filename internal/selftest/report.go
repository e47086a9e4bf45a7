package selftest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Status is a case's verdict.
type Status string

const (
	// Contained: the attempt stayed inside the sandbox, or was refused,
	// and the host's evidence says so.
	Contained Status = "contained"
	// Uncontained: the attempt reached past the sandbox or took from
	// others what it should not.
	Uncontained Status = "UNCONTAINED"
	// Inconclusive: the case could not tell (its control failed, a step
	// errored); it counts as a failure.
	Inconclusive Status = "inconclusive"
	// Skipped: the case does not apply to this runtime or host.
	Skipped Status = "skipped"
)

// Result is one case's outcome.
type Result struct {
	Case     string `json:"case"`     // category/name, e.g. reach/metadata
	Tried    string `json:"tried"`    // what the attacker did
	Status   Status `json:"status"`   // the verdict
	Evidence string `json:"evidence"` // what the verdict rests on
}

// RuntimeReport is every case run on one runtime.
type RuntimeReport struct {
	Runtime string   `json:"runtime"`
	Results []Result `json:"results"`
	Seconds float64  `json:"seconds"`
}

// Report is a whole selftest.
type Report struct {
	Version  string          `json:"version"` // the daemon's
	Runtimes []RuntimeReport `json:"runtimes"`
}

// Failures counts the cases that are neither contained nor skipped.
func (r *Report) Failures() int {
	n := 0
	for _, rr := range r.Runtimes {
		for _, res := range rr.Results {
			if res.Status == Uncontained || res.Status == Inconclusive {
				n++
			}
		}
	}
	return n
}

// WriteTable prints one table per runtime and a last line with the
// verdict.
func (r *Report) WriteTable(w io.Writer) {
	for _, rr := range r.Runtimes {
		fmt.Fprintf(w, "runtime %s (%d cases, %.0f s)\n", rr.Runtime, len(rr.Results), rr.Seconds)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CASE\tRESULT\tTRIED\tEVIDENCE")
		for _, res := range rr.Results {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Case, res.Status, oneLine(res.Tried, 70), oneLine(res.Evidence, 160))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	if n := r.Failures(); n > 0 {
		fmt.Fprintf(w, "selftest: %d case(s) not contained or inconclusive\n", n)
	} else {
		fmt.Fprintln(w, "selftest: every case contained")
	}
}

// oneLine flattens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
