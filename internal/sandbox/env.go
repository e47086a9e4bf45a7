package sandbox

import "strings"

// MergeEnv returns base (KEY=VALUE items) with over's variables replacing
// same-named ones in place and new ones appended in over's order: an
// image's environment under a sandbox's, or a build's under a step's.
func MergeEnv(base, over []string) []string {
	idx := map[string]int{}
	out := append([]string(nil), base...)
	for i, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		idx[k] = i
	}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}
