package runtimetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/runtime"
)

// testPauseResume: a paused sandbox comes back with its files and its
// processes, which continue from where they were.
func testPauseResume(t *testing.T, e Env, p runtime.Pauser) {
	s := start(t, e, runtime.Resources{MemoryLimitMB: 512})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	data := make([]byte, 8<<20)
	rand.Read(data)
	if _, err := s.client.WriteFile(ctx, "/root/blob", bytes.NewReader(data), 0o600, ""); err != nil {
		t.Fatal(err)
	}
	// Written by rename, so that a reader (right after a resume, too)
	// never sees the file truncated but not yet written.
	counter := `i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done`
	if got := run(t, s, agentapi.StartRequest{Args: []string{"sh", "-c", "setsid sh -c '" + counter + "' </dev/null >/dev/null 2>&1 &"}}, ""); got.code != 0 {
		t.Fatalf("starting the counter: %+v", got)
	}
	time.Sleep(time.Second)
	before := readCount(t, s)
	if err := s.client.EndSession(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(ctx, s.ref); err != nil {
		t.Fatal(err)
	}
	if st, err := e.Runtime.Status(ctx, s.ref); err != nil || st != runtime.StatePaused {
		t.Fatalf("status after pause: %q %v", st, err)
	}
	time.Sleep(2 * time.Second) // paused time must not count for the guest
	if err := p.Resume(ctx, s.ref); err != nil {
		t.Fatal(err)
	}
	if st, err := e.Runtime.Status(ctx, s.ref); err != nil || st != runtime.StateRunning {
		t.Fatalf("status after resume: %q %v", st, err)
	}
	s.client = reconnect(t, e, s.ref)
	after := readCount(t, s)
	if after < before || after > before+15 {
		t.Errorf("counter at %d before the pause and %d right after the resume: it did not continue where it was", before, after)
	}
	if _, later := countRunsOn(t, s); later <= after {
		t.Errorf("counter stopped after the resume: %d then %d", after, later)
	}
	r, _, err := s.client.ReadFile(ctx, "/root/blob", "")
	if err != nil {
		t.Fatal(err)
	}
	back, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(back, data) {
		t.Errorf("the file changed across pause and resume (%d bytes back)", len(back))
	}
}

// countRunsOn reads the counter, then reads it again until it has moved
// on or 3 s have passed, and returns both readings. A restored vm guest
// can idle until an interrupt comes, and the runtime sends one each second
// (docs/ARCHITECTURE.md, vm memory snapshots), so a shorter wait would
// measure the kick's phase, not whether the processes run.
func countRunsOn(t *testing.T, s *sandbox) (int, int) {
	t.Helper()
	first := readCount(t, s)
	next := first
	for deadline := time.Now().Add(3 * time.Second); next <= first && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		next = readCount(t, s)
	}
	return first, next
}

func readCount(t *testing.T, s *sandbox) int {
	t.Helper()
	got := run(t, s, agentapi.StartRequest{Args: []string{"cat", "/tmp/count"}}, "")
	n, err := strconv.Atoi(strings.TrimSpace(got.stdout))
	if err != nil {
		t.Fatalf("reading the counter: %+v", got)
	}
	return n
}

func reconnect(t *testing.T, e Env, ref runtime.Ref) *agentapi.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := agentapi.Connect(ctx, func(ctx context.Context) (net.Conn, error) { return e.Runtime.Dial(ctx, ref) })
	if err != nil {
		t.Fatalf("agent handshake after resume: %v", err)
	}
	return c
}
