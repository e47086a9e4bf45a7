package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// The "survives faults": the daemon is killed with SIGKILL at a
// random point of a create, pause, memory snapshot, fork or image build
// (with a run step), 50 times, and restarted on the same state directory
// each time. After every restart nothing acknowledged is lost (every
// sandbox, snapshot and image whose call returned before the kill is
// there, with its data: a sandbox's env and files, a snapshot that
// restores, an image that starts) and no record is half-done (each is
// live and working, or ended with a reason); once everything is removed
// nothing is left on the host. CORRAL_CHAOS_SEED=N replays a run.
func TestChaosKill9(t *testing.T) {
	t.Parallel()
	runChaos(t, "gvisor", 50, chaosOps)
}

// The same on vm sandboxes, fewer times (a guest boots in seconds under
// TCG): creates, pauses, memory snapshots and forks of QEMU guests.
func TestChaosKill9VM(t *testing.T) {
	t.Parallel()
	runChaos(t, "vm", 20, chaosOps[:4])
}

// runChaos kills the daemon kills times, in ops spread evenly, on
// sandboxes of runtime rt.
func runChaos(t *testing.T, rt string, kills int, ops []chaosOp) {
	if rt == "vm" {
		holdVM(t)
	}
	seed := chaosSeed(t)
	c := &chaos{
		t: t, d: startDaemon(t, "--max-sandboxes", "64"), runtime: rt, seed: seed,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seen: map[string]bool{},
		typical: map[string]time.Duration{}, inside: map[string]int{}, after: map[string]int{},
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos seed %d (CORRAL_CHAOS_SEED=%d replays this run); the daemon's log before the last restart:\n%s", seed, seed, c.prevLog)
		}
	})
	start := time.Now()
	for _, op := range ops {
		c.calibrate(op)
	}
	for i, op := range c.plan(ops, kills) {
		c.round(i, op)
		if t.Failed() {
			return // the first broken invariant is the one worth reading
		}
	}
	t.Logf("%d kills in %s; inside an operation / after its answer: %v / %v; typical durations %v",
		kills, time.Since(start).Round(time.Second), c.inside, c.after, c.typical)
	c.finish()
}

// chaosSeed is CORRAL_CHAOS_SEED, or a new seed; it is logged either way.
func chaosSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CORRAL_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CORRAL_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("chaos seed %d", seed)
	return seed
}

// chaosOp is one operation the daemon is killed in: run makes the call
// and, when it succeeds, returns what it acknowledged, to be added to the
// ledger.
type chaosOp struct {
	name string
	run  func(c *chaos, ctx context.Context) (ack func(), err error)
}

var chaosOps = []chaosOp{
	{"create", (*chaos).opCreate},
	{"pause", (*chaos).opPause},
	{"snapshot", (*chaos).opSnapshot},
	{"fork", (*chaos).opFork},
	{"build", (*chaos).opBuild},
}

// plan is the kills' operations: each of ops as often, in a random order.
func (c *chaos) plan(ops []chaosOp, kills int) []chaosOp {
	var plan []chaosOp
	for i := range kills {
		plan = append(plan, ops[i%len(ops)])
	}
	c.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	return plan
}

// calibrate runs op to its end twice, to learn how long it takes here
// (the second time: the first may fill caches, such as a build's base
// layer).
func (c *chaos) calibrate(op chaosOp) {
	c.t.Helper()
	for range 2 {
		c.prepare(op)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		start := time.Now()
		ack, err := op.run(c, ctx)
		cancel()
		if err != nil {
			c.t.Fatalf("%s (calibration, no kill): %v", op.name, err)
		}
		c.typical[op.name] = time.Since(start).Round(time.Millisecond)
		ack()
		c.settle()
	}
}

// round runs op, kills the daemon after a random delay drawn over the
// op's typical duration (at once if the op answers first), restarts it
// and checks the ledger against what the restarted daemon has.
func (c *chaos) round(i int, op chaosOp) {
	c.t.Helper()
	c.prepare(op)
	delay := time.Duration(c.rng.Int64N(int64(c.typical[op.name])))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	type result struct {
		ack func()
		err error
	}
	done := make(chan result, 1)
	go func() {
		ack, err := op.run(c, ctx)
		done <- result{ack, err}
	}()
	var res result
	select {
	case res = <-done:
		c.after[op.name]++
		c.d.kill9()
	case <-time.After(delay):
		c.d.kill9()
		res = <-done
		c.inside[op.name]++
	}
	c.t.Logf("kill %d: %s after %s: %v", i+1, op.name, delay.Round(time.Millisecond), errOr(res.err, "acknowledged"))
	if res.err == nil {
		res.ack()
	}
	c.prevLog = c.d.log.String()
	c.d.start()
	c.settle()
}

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

// chaosCtx bounds one check or setup call.
func chaosCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 3*time.Minute)
}

// opCreate creates a sandbox with an env value and a tag of its own.
func (c *chaos) opCreate(ctx context.Context) (func(), error) {
	n := c.next()
	env := fmt.Sprintf("env-%d-%d", c.seed, n)
	sb, err := c.d.client.Create(ctx, apiv1.CreateSandboxRequest{
		Runtime: c.runtime, Env: map[string]string{"CHAOS": env}, Tags: map[string]string{"chaos": strconv.Itoa(n)}, Timeout: 3600,
	})
	if err != nil {
		return nil, err
	}
	return func() { c.boxes = append(c.boxes, &chaosBox{id: sb.ID, env: env}) }, nil
}

// opPause pauses a running sandbox of the ledger.
func (c *chaos) opPause(ctx context.Context) (func(), error) {
	b := c.target()
	if _, err := c.d.client.Pause(ctx, b.id); err != nil {
		return nil, err
	}
	return func() { b.paused = true }, nil
}

// opSnapshot takes a named memory snapshot of a running sandbox.
func (c *chaos) opSnapshot(ctx context.Context) (func(), error) {
	b := c.target()
	name := fmt.Sprintf("chaos-%d", c.next())
	sn, err := c.d.client.SnapshotMemory(ctx, b.id, name)
	if err != nil {
		return nil, err
	}
	return func() { c.snaps = append(c.snaps, &chaosSnap{id: sn.ID, name: name, mark: b.mark}) }, nil
}

// opFork forks a running sandbox into two copies.
func (c *chaos) opFork(ctx context.Context) (func(), error) {
	b := c.target()
	copies, err := c.d.client.Fork(ctx, b.id, 2)
	if err != nil {
		return nil, err
	}
	return func() {
		for _, cp := range copies {
			c.boxes = append(c.boxes, &chaosBox{id: cp.ID, env: b.env, mark: b.mark})
		}
	}, nil
}

// opBuild builds and tags an image whose run step writes a file of its
// own (so no build is a cache hit).
func (c *chaos) opBuild(ctx context.Context) (func(), error) {
	n := c.next()
	nonce := fmt.Sprintf("built-%d-%d", c.seed, n)
	tag := fmt.Sprintf("chaos/b%d:1", n)
	s, err := c.d.client.Build(ctx, apiv1.BuildRequest{Tag: tag, Spec: apiv1.BuildSpec{
		Base:  apiv1.BuildBase{Debian: "bookworm"},
		Steps: []apiv1.BuildStep{{Run: apiv1.StringList{"echo " + nonce + " > /chaos-build"}}},
		CPU:   1, MemoryMB: 512,
	}})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if _, err := s.Wait(nil); err != nil {
		return nil, err
	}
	return func() { c.images = append(c.images, &chaosImage{tag: tag, nonce: nonce}) }, nil
}
