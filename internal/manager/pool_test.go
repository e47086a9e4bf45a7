package manager

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// openPooled is open with a warm pool of n.
func (e *env) openPooled(n int) *Manager {
	e.t.Helper()
	m, err := New(context.Background(), Config{
		StateDir: e.dir, BaseRootFS: "/", AgentBinary: "/proc/self/exe", Store: e.store,
		Runtimes: map[string]runtime.Runtime{"gvisor": e.rt}, MaxSandboxes: 8, WarmPool: n,
		Logger: slog.New(slog.DiscardHandler), AgentTimeout: 10 * time.Second,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Close)
	return m
}

// poolReady waits until the pool holds n ready sandboxes.
func (e *env) poolReady(n int) []string {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		e.m.pool.mu.Lock()
		var ids []string
		for _, l := range e.m.pool.ready {
			ids = append(ids, l.ref.ID)
		}
		filling := e.m.pool.filling
		e.m.pool.mu.Unlock()
		if len(ids) == n && filling == 0 {
			return ids
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("the warm pool did not reach %d sandboxes", n)
	return nil
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
