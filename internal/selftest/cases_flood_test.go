package selftest

import (
	"testing"

	"corral/internal/sandboxlog"
)

func TestTrailBudgetMatchesTheDaemon(t *testing.T) {
	if trailBurst != sandboxlog.Burst || trailRate != sandboxlog.Rate || trailWindow != sandboxlog.Window || evidencePerWindow != sandboxlog.EvidencePerWindow {
		t.Fatalf("the selftest's budget (%d, %d/s, %s, %d) is not the daemon's (%d, %d/s, %s, %d)",
			trailBurst, trailRate, trailWindow, evidencePerWindow, sandboxlog.Burst, sandboxlog.Rate, sandboxlog.Window, sandboxlog.EvidencePerWindow)
	}
}
