package manager

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// openKeyed is open with a port key and warm pools.
func (e *env) openKeyed(key []byte, pools ...WarmPoolConfig) *Manager {
	e.t.Helper()
	m, err := New(context.Background(), Config{
		StateDir: e.dir, BaseRootFS: "/", AgentBinary: "/proc/self/exe", Records: e.store,
		Runtimes: map[string]runtime.Runtime{"gvisor": e.rt}, MaxSandboxes: 8, WarmPools: pools, PortKey: key,
		Logger: slog.New(slog.DiscardHandler), AgentTimeout: 10 * time.Second,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Close)
	return m
}

// Port tokens are derived, not stored: a sandbox's token opens its ports
// and no other's, is the same after a restart with the same key, opens
// nothing under another key, and is in none of the database's files.
func TestPortTokenDerived(t *testing.T) {
	e := newEnv(t)
	e.m.Close()
	key := bytes.Repeat([]byte{7}, 32)
	e.m = e.openKeyed(key)
	spec := sandbox.Spec{Expose: []sandbox.ExposedPort{{Port: 8080}}}
	a, b := e.create(spec), e.create(spec)
	tokA, tokB := e.m.PortToken(a), e.m.PortToken(b)
	if len(tokA) != 48 || tokA == tokB {
		t.Fatalf("tokens %q %q", tokA, tokB)
	}
	ports := e.m.Ports()
	for name, tc := range map[string]struct {
		token string
		want  error
	}{
		"its own":      {tokA, nil},
		"another's":    {tokB, errdefs.ErrUnauthenticated},
		"none":         {"", errdefs.ErrUnauthenticated},
		"a prefix":     {tokA[:47], errdefs.ErrUnauthenticated},
		"tampered":     {tokA[:47] + "x", errdefs.ErrUnauthenticated},
		"the port key": {string(key), errdefs.ErrUnauthenticated},
	} {
		if err := ports.Access(a.ID, 8080, tc.token, false); !errors.Is(err, tc.want) || err == nil && tc.want != nil {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	for _, p := range []string{"corral.db", "corral.db-wal"} {
		if raw, err := os.ReadFile(filepath.Join(e.dir, p)); err == nil && (bytes.Contains(raw, []byte(tokA)) || bytes.Contains(raw, []byte(tokB))) {
			t.Errorf("%s holds a port token", p)
		}
	}

	e.m.Close()
	e.m = e.openKeyed(key)
	rec, err := e.m.Get(context.Background(), a.ID)
	if err != nil || e.m.PortToken(rec) != tokA {
		t.Fatalf("after a restart: %v, token changed: %v", err, e.m.PortToken(rec) != tokA)
	}
	if err := e.m.Ports().Access(a.ID, 8080, tokA, false); err != nil {
		t.Errorf("the token after a restart: %v", err)
	}
	e.m.Close()
	e.m = e.openKeyed(bytes.Repeat([]byte{8}, 32))
	if err := e.m.Ports().Access(a.ID, 8080, tokA, false); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("the token under another key: %v", err)
	}
}

// A warm pool's claim gives the sandbox a fresh token: the one it had in
// the pool opens nothing.
func TestPortTokenFreshOnClaim(t *testing.T) {
	e := newEnv(t)
	e.m.Close()
	e.m = e.openKeyed(bytes.Repeat([]byte{7}, 32), WarmPoolConfig{Size: 1})
	pooled := e.poolReady(1)[0]
	h := e.m.lookup(pooled)
	if h == nil {
		t.Fatal("the pooled sandbox has no handle")
	}
	before := e.m.PortToken(h.Record())
	sb := e.create(sandbox.Spec{Expose: []sandbox.ExposedPort{{Port: 8080}}})
	if sb.ID != pooled {
		t.Fatalf("the create got %s, not the pooled %s", sb.ID, pooled)
	}
	after := e.m.PortToken(sb)
	if after == before {
		t.Fatal("the claim kept the pooled sandbox's token")
	}
	if err := e.m.Ports().Access(sb.ID, 8080, before, false); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("the pool's token after the claim: %v", err)
	}
	if err := e.m.Ports().Access(sb.ID, 8080, after, false); err != nil {
		t.Errorf("the claimed token: %v", err)
	}
}
