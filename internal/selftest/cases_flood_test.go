package selftest

import (
	"testing"

	"corral/internal/manager"
)

func TestDecisionBoundMatchesTheDaemon(t *testing.T) {
	if decisionBurst != manager.DecisionBurst || decisionRate != manager.DecisionRate || decisionWindow != manager.DecisionWindow {
		t.Fatalf("the selftest's bound (%d, %d/s, %s) is not the daemon's (%d, %d/s, %s)",
			decisionBurst, decisionRate, decisionWindow, manager.DecisionBurst, manager.DecisionRate, manager.DecisionWindow)
	}
}
