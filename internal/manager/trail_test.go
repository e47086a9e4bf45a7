package manager

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"corral/internal/netpolicy/policy"
	"corral/internal/sandbox"
	"corral/internal/sandboxlog"
)

// A daemon that stops writes what it had counted: the queued decisions
// and the folds of a window not yet ended.
func TestDecisionsFlushedAtClose(t *testing.T) {
	e := newEnv(t)
	id := e.create(sandbox.Spec{}).ID
	const sent = sandboxlog.Burst + 60
	for i := 0; i < sent; i++ {
		e.m.RecordDecision(policy.Decision{SandboxID: id, Allowed: true, Proto: "dns", Via: "dns", Domain: fmt.Sprintf("n%d.flood.test", i)})
	}
	e.m.Close()
	evs, err := e.store.Events(context.Background(), id, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	detailed, folded := 0, 0
	for _, ev := range evs {
		switch ev.Kind {
		case "egress_allowed":
			detailed++
		case "limit_reached":
			n, _ := strconv.Atoi(ev.Fields["folded"])
			folded += n
		}
	}
	// The sandbox's create took a token of the same budget.
	if detailed+folded != sent || folded == 0 {
		t.Errorf("after close: %d detailed and %d folded of %d decisions", detailed, folded, sent)
	}
}
