package e2e

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/testwait"
)

// Waiting in these tests is on a condition, never on the clock alone
// (package testwait); a plain time.Sleep is left only where time itself
// is what a test measures or must let pass (a timeout to expire, a rate's
// window to end).
var (
	poll    = testwait.Poll
	waitFor = testwait.For
)

// maxVMTests bounds the tests that run vm sandboxes at once: a guest
// under TCG keeps a core busy while it boots, and this machine has two.
const maxVMTests = 2

var vmTests = struct {
	sem  chan struct{}
	held sync.Map // testing.TB -> true: the test holds a token

	mu    sync.Mutex
	holds []vmHold // the tokens given back, for the run's summary
}{sem: make(chan struct{}, maxVMTests)}

// vmHold is how long a test waited for a vm token and then held it.
type vmHold struct {
	test         string
	waited, held time.Duration
}

// holdVM makes t one of the tests that run vm sandboxes, waiting while
// maxVMTests others are; t keeps its place until it ends. The harness
// calls it for t's daemon when a create, a warm pool or the E2B face asks
// for the vm runtime; a test that starts vm sandboxes another way calls
// it itself.
func holdVM(t testing.TB) {
	if _, loaded := vmTests.held.LoadOrStore(t, true); loaded {
		return
	}
	asked := time.Now()
	vmTests.sem <- struct{}{}
	got := time.Now()
	t.Cleanup(func() {
		vmTests.held.Delete(t)
		<-vmTests.sem
		vmTests.mu.Lock()
		vmTests.holds = append(vmTests.holds, vmHold{t.Name(), got.Sub(asked), time.Since(got)})
		vmTests.mu.Unlock()
	})
}

// vmSummary prints how the vm tokens were used: when their lanes are
// busy from the first test to the last, they are the run's critical path.
func vmSummary(w io.Writer) {
	vmTests.mu.Lock()
	defer vmTests.mu.Unlock()
	var held, waited time.Duration
	for _, h := range vmTests.holds {
		held += h.held
		waited += h.waited
	}
	fmt.Fprintf(w, "e2e: %d tests held a vm token (%d lanes) for %s in all (%s a lane), and waited %s for one\n",
		len(vmTests.holds), maxVMTests, held.Round(time.Second), (held / maxVMTests).Round(time.Second), waited.Round(time.Second))
	slices.SortFunc(vmTests.holds, func(a, b vmHold) int { return cmp.Compare(b.held, a.held) })
	for _, h := range vmTests.holds[:min(10, len(vmTests.holds))] {
		fmt.Fprintf(w, "   %6.1f s held  %6.1f s waited  %s\n", h.held.Seconds(), h.waited.Seconds(), h.test)
	}
}

// asksVM reports whether serve or CLI arguments ask for the vm runtime.
func asksVM(args []string) bool {
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		switch {
		case (a == "--runtime" || a == "--e2b-runtime") && next == "vm", a == "--runtime=vm", a == "--e2b-runtime=vm",
			a == "--warm-pool-spec" && strings.Contains(next, "runtime=vm"):
			return true
		}
	}
	return false
}
