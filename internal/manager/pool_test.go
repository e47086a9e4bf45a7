package manager

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"corral/internal/runtime"
	"corral/internal/sandbox"
	"corral/internal/testwait"
)

// openPooled is open with a warm pool of n of the default spec and the
// pools more.
func (e *env) openPooled(n int, more ...WarmPoolConfig) *Manager {
	e.t.Helper()
	m, err := New(context.Background(), Config{
		StateDir: e.dir, BaseRootFS: "/", AgentBinary: "/proc/self/exe", Records: e.store,
		Runtimes: map[string]runtime.Runtime{"gvisor": e.rt}, MaxSandboxes: 8,
		WarmPools: append([]WarmPoolConfig{{Size: n}}, more...),
		Logger:    slog.New(slog.DiscardHandler), AgentTimeout: 10 * time.Second,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Close)
	return m
}

// poolReady waits until the first pool holds n ready sandboxes.
func (e *env) poolReady(n int) []string { return e.poolNReady(0, n) }

// poolNReady waits until pool i holds n ready sandboxes.
func (e *env) poolNReady(i, n int) []string {
	e.t.Helper()
	p := e.m.pools[i]
	var ids []string
	testwait.For(e.t, 20*time.Second, fmt.Sprintf("warm pool %d to hold %d ready sandboxes", i, n), func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		ids = ids[:0]
		for _, l := range p.ready {
			ids = append(ids, l.ID())
		}
		return len(ids) == n && p.filling == 0
	})
	return ids
}

func TestWarmPool(t *testing.T) {
	e := newEnv(t)
	e.m.Close()
	e.m = e.openPooled(2)
	pooled := e.poolReady(2)
	if list, _ := e.m.List(context.Background()); len(list) != 0 {
		t.Errorf("pooled sandboxes are listed: %d", len(list))
	}

	sb := e.create(sandbox.Spec{Name: "claimed", Env: map[string]string{"GREETING": "hi"}, Timeout: time.Minute,
		Entrypoint: []string{"sh", "-c", "sleep 600"}})
	if sb.ID != pooled[0] {
		t.Errorf("the create got %s, not the pooled %s", sb.ID, pooled[0])
	}
	if out, _ := e.run(sb.ID, "sh", "-c", "echo $GREETING"); out != "hi\n" {
		t.Errorf("the claimed sandbox's env: %q", out)
	}
	if sb.Spec.Name != "claimed" || sb.Spec.Timeout != time.Minute || time.Since(sb.CreatedAt) > 5*time.Second {
		t.Errorf("the claimed record: name %q, timeout %s, created %s", sb.Spec.Name, sb.Spec.Timeout, sb.CreatedAt)
	}
	if list, _ := e.m.List(context.Background()); len(list) != 1 || list[0].ID != sb.ID {
		t.Errorf("list after the claim: %v", list)
	}
	// The pool refills; a spec it does not hold starts cold.
	e.poolReady(2)
	cold := e.create(sandbox.Spec{MemoryMB: 700})
	for _, id := range e.poolReady(2) {
		if id == cold.ID || id == sb.ID {
			t.Errorf("%s was handed out and is still in the pool", id)
		}
	}
	if _, err := e.m.Terminate(context.Background(), sb.ID, sandbox.EndTerminated, nil); err != nil {
		t.Fatal(err)
	}

	// A restarted daemon ends the previous pool and fills its own.
	old := e.poolReady(2)
	e.m.Close()
	e.m = e.openPooled(1)
	for _, id := range old {
		if rec, err := e.m.Get(context.Background(), id); err != nil || !rec.State.Terminal() {
			t.Errorf("pooled %s after a restart: %+v %v", id, rec, err)
		}
	}
	e.poolReady(1)
}

// A second pool of another spec serves the creates that fit it, and only
// those.
func TestWarmPoolsPerSpec(t *testing.T) {
	e := newEnv(t)
	e.m.Close()
	e.m = e.openPooled(1, WarmPoolConfig{Size: 1, Spec: sandbox.Spec{MemoryMB: 700, CPU: 0.5}})
	big := e.poolNReady(1, 1)
	def := e.poolReady(1)
	sb := e.create(sandbox.Spec{MemoryMB: 700, CPU: 0.5})
	if sb.ID != big[0] {
		t.Errorf("a create of the second pool's spec got %s, not the pooled %s", sb.ID, big[0])
	}
	other := e.create(sandbox.Spec{MemoryMB: 700})
	if other.ID == def[0] || other.ID == big[0] {
		t.Errorf("a create that fits no pool got pooled %s", other.ID)
	}
	status := e.m.WarmPools()
	if len(status) != 2 || status[1].Spec.MemoryMB != 700 || status[1].Size != 1 {
		t.Errorf("pools: %+v", status)
	}
}

func TestParseWarmPool(t *testing.T) {
	c, err := ParseWarmPool("size=3,runtime=vm,image=base,cpu=2,memory_mb=1024,disk_mb=2048")
	if err != nil || c.Size != 3 || c.Spec.Runtime != "vm" || c.Spec.CPU != 2 || c.Spec.MemoryMB != 1024 || c.Spec.DiskMB != 2048 {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"", "size=0", "size=2,runtime=qemu", "size=2,memory_mb=x", "size=2,color=red", "runtime=vm", "size=1,cpu=1000"} {
		if _, err := ParseWarmPool(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The daemon's own default pool gives way to a configured pool of the same
// spec; two configured ones of a spec conflict.
func TestAutoPoolGivesWay(t *testing.T) {
	pools, err := newPools([]WarmPoolConfig{{Size: 2, Auto: true}, {Size: 5}, {Size: 1, Spec: sandbox.Spec{MemoryMB: 700}}})
	if err != nil || len(pools) != 2 || pools[0].size != 5 || pools[1].size != 1 {
		t.Fatalf("auto then configured: %v %+v", err, pools)
	}
	pools, err = newPools([]WarmPoolConfig{{Size: 5}, {Size: 2, Auto: true}})
	if err != nil || len(pools) != 1 || pools[0].size != 5 {
		t.Fatalf("configured then auto: %v %+v", err, pools)
	}
	if _, err := newPools([]WarmPoolConfig{{Size: 5}, {Size: 3}}); err == nil {
		t.Fatal("two configured pools of one spec were accepted")
	}
}
