package envd

import (
	"slices"
	"strings"
	"testing"

	"corral/internal/agentapi"
)

func TestSortWalkOrder(t *testing.T) {
	paths := []string{"/d/b", "/d/a-b", "/d/a/x/y", "/d/C", "/d/a", "/d/a/x", "/d/_", "/d/a/w"}
	es := make([]agentapi.EntryInfo, len(paths))
	for i, p := range paths {
		es[i] = agentapi.EntryInfo{Path: p}
	}
	sortWalkOrder(es)
	var got []string
	for _, e := range es {
		got = append(got, e.Path)
	}
	want := []string{"/d/C", "/d/_", "/d/a", "/d/a/w", "/d/a/x", "/d/a/x/y", "/d/a-b", "/d/b"}
	if !slices.Equal(got, want) {
		t.Fatalf("walk order %q, want %q", got, want)
	}
}

// FuzzComparePaths checks comparePaths against comparing the split
// components, and that it is antisymmetric.
func FuzzComparePaths(f *testing.F) {
	f.Add("/a/b", "/a-b")
	f.Add("a", "a/")
	f.Add("", "/")
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, ba := comparePaths(a, b), comparePaths(b, a)
		if ab != -ba {
			t.Fatalf("compare(%q,%q)=%d but compare(%q,%q)=%d", a, b, ab, b, a, ba)
		}
		if ab != slices.Compare(strings.Split(a, "/"), strings.Split(b, "/")) {
			t.Fatalf("compare(%q,%q)=%d, component-wise %d", a, b, ab, slices.Compare(strings.Split(a, "/"), strings.Split(b, "/")))
		}
	})
}
