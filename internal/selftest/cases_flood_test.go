package selftest

import (
	"testing"

	"corral/internal/netpolicy/dnsd"
	"corral/internal/sandboxlog"
)

func TestTrailBudgetMatchesTheDaemon(t *testing.T) {
	if trailBurst != sandboxlog.Burst || trailRate != sandboxlog.Rate || trailWindow != sandboxlog.Window || evidencePerWindow != sandboxlog.EvidencePerWindow {
		t.Fatalf("the selftest's budget (%d, %d/s, %s, %d) is not the daemon's (%d, %d/s, %s, %d)",
			trailBurst, trailRate, trailWindow, evidencePerWindow, sandboxlog.Burst, sandboxlog.Rate, sandboxlog.Window, sandboxlog.EvidencePerWindow)
	}
}

func TestUpstreamAndLogBudgetsMatchTheDaemon(t *testing.T) {
	if upstreamBurst != dnsd.DefaultUpstreamBurst || upstreamRate != dnsd.DefaultUpstreamRate || logBurst != sandboxlog.LogBurst || logRate != sandboxlog.LogRate ||
		maxFieldBytes != sandboxlog.MaxValue {
		t.Fatalf("the selftest's upstream rate (%d, %d/s) and log budget (%d, %g/s) are not the daemon's (%d, %d/s; %d, %g/s)",
			upstreamBurst, upstreamRate, logBurst, logRate, dnsd.DefaultUpstreamBurst, dnsd.DefaultUpstreamRate, sandboxlog.LogBurst, sandboxlog.LogRate)
	}
}
