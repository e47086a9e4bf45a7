package main

import (
	"strings"
	"testing"
)

// A failed test's digest names it, keeps its --- FAIL lines and its error
// lines with the lines that follow each, and leaves out the rest; a
// package that failed without a failed test is named; a
// passing test's output is held back but its result is kept.
func TestCopyOutputDigest(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"corral/x","Test":"TestA"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA","Output":"    a_test.go:12: noise before\n"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA/sub","Output":"    a_test.go:40: create: exit 1\n"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA/sub","Output":"        the boot deadline passed\n"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA","Output":"        {\"log\":1}\n"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA","Output":"        {\"log\":2}\n"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA","Output":"        {\"log\":3}\n"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA","Output":"        {\"log\":4}\n"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA/sub","Output":"    --- FAIL: TestA/sub (1.00s)\n"}`,
		`{"Action":"fail","Package":"corral/x","Test":"TestA/sub","Elapsed":1}`,
		`{"Action":"output","Package":"corral/x","Test":"TestA","Output":"--- FAIL: TestA (2.00s)\n"}`,
		`{"Action":"fail","Package":"corral/x","Test":"TestA","Elapsed":2}`,
		`{"Action":"output","Package":"corral/x","Test":"TestB","Output":"    b_test.go:3: fine\n"}`,
		`{"Action":"output","Package":"corral/x","Test":"TestB","Output":"--- PASS: TestB (0.50s)\n"}`,
		`{"Action":"pass","Package":"corral/x","Test":"TestB","Elapsed":0.5}`,
		`{"Action":"fail","Package":"corral/x","Elapsed":3}`,
		`{"Action":"output","Package":"corral/y","Output":"FAIL\tcorral/y [build failed]\n"}`,
		`{"Action":"fail","Package":"corral/y","Elapsed":0}`,
	}, "\n")
	var out strings.Builder
	results, digest, err := copyOutput(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 5 {
		t.Errorf("results: %+v", results)
	}
	if strings.Contains(out.String(), "b_test.go:3") || !strings.Contains(out.String(), "--- PASS: TestB") {
		t.Errorf("a passing test's log lines were printed, or its result was not:\n%s", out.String())
	}
	if len(digest) != 2 {
		t.Fatalf("digest: %q", digest)
	}
	want := "x TestA\n" +
		"    a_test.go:12: noise before\n" +
		"    a_test.go:40: create: exit 1\n" +
		"        the boot deadline passed\n" +
		"        {\"log\":1}\n" +
		"        {\"log\":2}\n" +
		"    --- FAIL: TestA/sub (1.00s)\n" +
		"--- FAIL: TestA (2.00s)\n"
	if digest[0] != want {
		t.Errorf("digest:\n%s\nwant:\n%s", digest[0], want)
	}
	if digest[1] != "corral/y: the package failed (its output is above)\n" {
		t.Errorf("package digest: %q", digest[1])
	}
}

// A digest is bounded in lines and in each line's bytes.
func TestDigestBounded(t *testing.T) {
	var lines []string
	for range 100 {
		lines = append(lines, "    a_test.go:1: "+strings.Repeat("é", 400)+"\n")
	}
	d := failureDigest("corral/x", "TestA", lines)
	got := strings.Split(strings.TrimSuffix(d, "\n"), "\n")
	if len(got) != digestLines+2 || got[len(got)-1] != "    …" {
		t.Fatalf("%d lines, last %q", len(got), got[len(got)-1])
	}
	for _, l := range got[1 : len(got)-1] {
		if len(l) > digestLineSize+len("…") || !strings.HasSuffix(l, "…") {
			t.Errorf("line of %d bytes: %.40q", len(l), l)
		}
	}
}
