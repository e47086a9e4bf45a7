// Command testlog reads `go test -json` on its standard input and writes
// the tests' output grouped by top-level test, each test's once it ends
// (parallel tests' lines would otherwise interleave): a test that fails,
// whole; one that passes or skips, only its result lines. Package lines
// (ok, FAIL, build errors) pass at once. At the end it prints the wall
// time of the run, each package's time, and the slowest top-level tests,
// so drift shows in every run's log. With -save FILE it also appends one
// JSON line per finished test (package, test, seconds, result) for
// comparing runs. Last it names what failed, each failed test with its
// first error lines (with -failures FILE, appended there too, so a script
// running several passes can repeat them all at its end, where a CI log's
// tail shows them). It exits 0: go test's own status is the run's
// (scripts/test.sh sets pipefail).
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// result is one finished test or package.
type result struct {
	Package string  `json:"package"`
	Test    string  `json:"test,omitempty"`
	Seconds float64 `json:"seconds"`
	Action  string  `json:"result"`
}

func main() {
	top := flag.Int("top", 20, "how many of the slowest tests to list")
	save := flag.String("save", "", "append each finished test's time to this file (JSON lines)")
	failures := flag.String("failures", "", "append what failed to this file")
	flag.Parse()
	start := time.Now()
	results, digest, err := copyOutput(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testlog:", err)
	}
	if *save != "" {
		if err := saveResults(*save, results); err != nil {
			fmt.Fprintln(os.Stderr, "testlog:", err)
		}
	}
	summarise(os.Stdout, results, time.Since(start), *top)
	if len(digest) > 0 {
		fmt.Fprintf(os.Stdout, "== what failed\n%s", strings.Join(digest, ""))
		if *failures != "" {
			if err := appendFile(*failures, strings.Join(digest, "")); err != nil {
				fmt.Fprintln(os.Stderr, "testlog:", err)
			}
		}
	}
}

// copyOutput writes the tests' output to w, grouped by top-level test
// (lines that are not JSON, such as a build failure's, as they are), and
// returns the results and a digest of the failures.
func copyOutput(r io.Reader, w io.Writer) ([]result, []string, error) {
	var out []result
	var digest []string
	testFailed := map[string]bool{} // packages with a failed test
	held := map[string][]string{}   // package and top-level test -> output so far
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		top, _, _ := strings.Cut(ev.Test, "/")
		key := ev.Package + " " + top
		switch {
		case ev.Action == "output" && ev.Test == "":
			io.WriteString(w, ev.Output)
		case ev.Action == "output":
			if !noise(ev.Output) {
				held[key] = append(held[key], ev.Output)
			}
		case ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip":
			out = append(out, result{Package: ev.Package, Test: ev.Test, Seconds: ev.Elapsed, Action: ev.Action})
			if ev.Test != "" && ev.Test == top {
				flush(w, held[key], ev.Action == "fail")
				if ev.Action == "fail" {
					digest = append(digest, failureDigest(ev.Package, top, held[key]))
					testFailed[ev.Package] = true
				}
				delete(held, key)
			}
			if ev.Test == "" && ev.Action == "fail" && !testFailed[ev.Package] {
				digest = append(digest, fmt.Sprintf("%s: the package failed (its output is above)\n", ev.Package))
			}
		}
	}
	for key, lines := range held { // a test the run cut short (a panic, a timeout)
		flush(w, lines, true)
		pkg, test, _ := strings.Cut(key, " ")
		digest = append(digest, failureDigest(pkg, test+" (cut short)", lines))
	}
	return out, digest, sc.Err()
}

// errorLine is a test's own log line (t.Error, t.Fatal, t.Log): a file
// and line, then the message.
var errorLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// Bounds of a failure's digest: its lines, the lines it keeps after each
// error line (a multi-line message's next), and each line's bytes.
const (
	digestLines    = 20
	digestFollow   = 3
	digestLineSize = 300
)

// failureDigest is a failed test's name, its --- FAIL lines and its
// first error lines with a few of the lines that follow each.
func failureDigest(pkg, test string, lines []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", strings.TrimPrefix(pkg, "corral/"), test)
	n, follow := 0, 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "--- FAIL"):
			follow = 0
		case errorLine.MatchString(l):
			follow = digestFollow
		case follow > 0:
			follow--
		default:
			continue
		}
		if n == digestLines {
			b.WriteString("    …\n")
			break
		}
		l = strings.TrimRight(l, "\n")
		if len(l) > digestLineSize {
			l = strings.ToValidUTF8(l[:digestLineSize], "") + "…"
		}
		b.WriteString(l + "\n")
		n++
	}
	return b.String()
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// flush writes a finished test's output: all of it when it failed, its
// result lines (--- PASS, --- SKIP and their reasons) otherwise.
func flush(w io.Writer, lines []string, all bool) {
	for i, l := range lines {
		if all || strings.HasPrefix(strings.TrimSpace(l), "--- ") || i > 0 && strings.Contains(lines[i-1], "--- SKIP") {
			io.WriteString(w, l)
		}
	}
}

// noise is go test -v's narration of starts and switches, which a log
// without -v does not have.
func noise(line string) bool {
	for _, p := range []string{"=== RUN ", "=== PAUSE ", "=== CONT ", "=== NAME "} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

func saveResults(path string, rs []result) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// summarise prints the run's wall time, the packages that took over a
// second, and the n slowest top-level tests.
func summarise(w io.Writer, rs []result, wall time.Duration, n int) {
	var pkgs, tests []result
	failed := 0
	for _, r := range rs {
		switch {
		case r.Test == "":
			pkgs = append(pkgs, r)
		case !strings.Contains(r.Test, "/"):
			tests = append(tests, r)
			if r.Action == "fail" {
				failed++
			}
		}
	}
	slower := func(a, b result) int { return cmp.Compare(b.Seconds, a.Seconds) }
	slices.SortFunc(pkgs, slower)
	slices.SortFunc(tests, slower)
	fmt.Fprintf(w, "\n== testlog: %d packages, %d top-level tests (%d failed), %s wall\n", len(pkgs), len(tests), failed, wall.Round(time.Second))
	for _, p := range pkgs {
		if p.Seconds >= 1 {
			fmt.Fprintf(w, "   %8.1f s  %-4s %s\n", p.Seconds, p.Action, p.Package)
		}
	}
	fmt.Fprintf(w, "== the %d slowest tests\n", min(n, len(tests)))
	for _, t := range tests[:min(n, len(tests))] {
		fmt.Fprintf(w, "   %8.1f s  %-4s %s %s\n", t.Seconds, t.Action, strings.TrimPrefix(t.Package, "corral/"), t.Test)
	}
}
