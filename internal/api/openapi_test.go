package api

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes keeps docs/openapi.yaml true: every served
// route is described and every described operation is served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	b, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pathRE := regexp.MustCompile(`^  (/v1/\S*):\s*$`)
	opRE := regexp.MustCompile(`^    (get|put|post|delete|patch):`)
	described := map[string]bool{}
	var path string
	for _, line := range strings.Split(string(b), "\n") {
		if m := pathRE.FindStringSubmatch(line); m != nil {
			path = m[1]
		} else if m := opRE.FindStringSubmatch(line); m != nil && path != "" {
			described[strings.ToUpper(m[1])+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, r := range routes {
		p := strings.ReplaceAll(r.pattern, "...}", "}")
		if !strings.Contains(p, " ") {
			// Any method: described as the methods a proxy serves.
			for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
				served[m+" "+p] = true
			}
			continue
		}
		served[p] = true
	}
	var missing, extra []string
	for r := range served {
		if !described[r] {
			missing = append(missing, r)
		}
	}
	for d := range described {
		if !served[d] {
			extra = append(extra, d)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("openapi.yaml out of date:\n served but not described: %v\n described but not served: %v", missing, extra)
	}
}
