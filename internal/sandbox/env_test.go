package sandbox

import (
	"strings"
	"testing"
)

func TestMergeEnv(t *testing.T) {
	got := strings.Join(MergeEnv([]string{"A=1", "B=2"}, []string{"B=3", "C=4", "A=5"}), " ")
	if got != "A=5 B=3 C=4" {
		t.Errorf("MergeEnv = %q", got)
	}
	if got := MergeEnv(nil, nil); len(got) != 0 {
		t.Errorf("MergeEnv(nil, nil) = %v", got)
	}
}
