package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// collectWatch reads events from s until want says it has seen enough (true)
// or 10 s pass.
func collectWatch(t *testing.T, s *agentapi.WatchStream, want func([]agentapi.WatchEvent) bool) []agentapi.WatchEvent {
	t.Helper()
	var got []agentapi.WatchEvent
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := s.Recv()
			if err != nil {
				return
			}
			got = append(got, ev)
			if want(got) {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.Close()
		<-done
		t.Fatalf("timed out; events so far: %+v", got)
	}
	return got
}

// has reports whether evs holds an event of typ for name.
func has(evs []agentapi.WatchEvent, typ, name string) bool {
	for _, ev := range evs {
		if ev.Type == typ && ev.Name == name {
			return true
		}
	}
	return false
}

// A recursive watch sees creates, writes, chmods, renames and removes,
// in directories made after it started too, with paths inside the root.
func TestWatchRecursive(t *testing.T) {
	root := t.TempDir()
	env := newEnv(t, root)
	w := filepath.Join(root, "w")
	if err := os.MkdirAll(filepath.Join(w, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := env.c.Watch(testCtx(t), "/w", true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path != "/w" {
		t.Errorf("watched path %q", s.Path)
	}
	steps := []func() error{
		func() error { return os.WriteFile(filepath.Join(w, "f"), []byte("1"), 0o644) },
		func() error { return os.Chmod(filepath.Join(w, "f"), 0o600) },
		func() error { return os.Rename(filepath.Join(w, "f"), filepath.Join(w, "g")) },
		func() error { return os.WriteFile(filepath.Join(w, "old", "deep"), []byte("x"), 0o644) },
		func() error { return os.MkdirAll(filepath.Join(w, "new", "sub"), 0o755) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	// The new directory is followed: what is made in it now is seen. The
	// watcher handles the kernel's events in order, so once it reports a
	// file made after new/sub, it watches new/sub.
	if err := os.WriteFile(filepath.Join(w, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	evs := collectWatch(t, s, func(evs []agentapi.WatchEvent) bool { return has(evs, agentapi.WatchCreate, "marker") })
	if err := os.WriteFile(filepath.Join(w, "new", "sub", "late"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(w, "g")); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, collectWatch(t, s, func(evs []agentapi.WatchEvent) bool { return has(evs, agentapi.WatchRemove, "g") })...)
	for _, want := range [][2]string{
		{agentapi.WatchCreate, "f"}, {agentapi.WatchWrite, "f"}, {agentapi.WatchChmod, "f"},
		{agentapi.WatchRename, "f"}, {agentapi.WatchCreate, "g"}, {agentapi.WatchCreate, "old/deep"},
		{agentapi.WatchCreate, "new"}, {agentapi.WatchCreate, "new/sub"}, {agentapi.WatchCreate, "new/sub/late"},
		{agentapi.WatchWrite, "new/sub/late"}, {agentapi.WatchRemove, "g"},
	} {
		if !has(evs, want[0], want[1]) {
			t.Errorf("no %s of %s in %+v", want[0], want[1], evs)
		}
	}
	for _, ev := range evs {
		if ev.Path != "/w/"+ev.Name {
			t.Errorf("event %+v: path is not the name inside /w", ev)
		}
		if ev.Name == "new" && !ev.Dir {
			t.Errorf("new is a directory: %+v", ev)
		}
	}
}

// A watch that is not recursive sees its directory's entries only; a
// watch whose directory goes ends with the reason.
func TestWatchFlatAndEnd(t *testing.T) {
	root := t.TempDir()
	env := newEnv(t, root)
	w := filepath.Join(root, "flat")
	if err := os.MkdirAll(filepath.Join(w, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := env.c.Watch(testCtx(t), "/flat", false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.WriteFile(filepath.Join(w, "sub", "hidden"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w, "seen"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(w); err != nil {
		t.Fatal(err)
	}
	evs := collectWatch(t, s, func(evs []agentapi.WatchEvent) bool { return evs[len(evs)-1].Type == agentapi.WatchEnd })
	if has(evs, agentapi.WatchCreate, "sub/hidden") || !has(evs, agentapi.WatchCreate, "seen") || !has(evs, agentapi.WatchRemove, "sub") {
		t.Errorf("events of a flat watch: %+v", evs)
	}
	if end := evs[len(evs)-1]; !strings.Contains(end.Error, "removed") {
		t.Errorf("end: %+v", end)
	}
	if _, err := s.Recv(); err == nil {
		t.Error("Recv after the end")
	}
}

// Bad watches are refused before anything starts.
func TestWatchBadInput(t *testing.T) {
	root := t.TempDir()
	env := newEnv(t, root)
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for _, tt := range []struct {
		path string
		kind error
		want string
	}{
		{"/missing", errdefs.ErrNotFound, "/missing"},
		{"/file", errdefs.ErrInvalidArgument, "not a directory"},
		{"", errdefs.ErrInvalidArgument, "path"},
		{"/../../..", errdefs.ErrNotFound, ""}, // the root itself is fine; see below
	} {
		s, err := env.c.Watch(ctx, tt.path, false, "")
		if tt.path == "/../../.." {
			if err != nil || s.Path != "/" {
				t.Errorf("watching above the root: %v (the root is what it names)", err)
			}
			if s != nil {
				s.Close()
			}
			continue
		}
		if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("watch %q: %v, want %v naming %q", tt.path, err, tt.kind, tt.want)
		}
	}
	// More watches than the agent holds at once are refused.
	env.srv.watches = make(chan struct{}, 1)
	s, err := env.c.Watch(ctx, "/", false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := env.c.Watch(ctx, "/", false, ""); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("a watch beyond the bound: %v", err)
	}
}

// A queue nobody reads drops events and counts them; the writer reports
// them as an overflow, so a slow reader costs a report, never memory.
func TestWatchOverflow(t *testing.T) {
	dir := t.TempDir()
	wt, err := newWatcher(dir, dir, false, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer wt.close()
	for i := range 100 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "events to be dropped", func() bool { return wt.dropped.Load() >= 92 })
	ww := &watchWriter{wt: wt}
	batch := ww.drain(nil)
	last := batch[len(batch)-1]
	if len(batch) != 9 || last.Type != agentapi.WatchOverflow || last.Dropped < 92 {
		t.Fatalf("drained %d events, last %+v", len(batch), last)
	}
	if len(wt.queue) != 0 || wt.dropped.Load() != 0 {
		t.Errorf("after draining: %d queued, %d dropped", len(wt.queue), wt.dropped.Load())
	}
}

// An agent that speaks only protocol 1 (frozen in an old snapshot) cannot
// watch: the client says so, naming its version, and nothing else breaks.
func TestWatchOldAgent(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Root: dir, Protocols: []int{1}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx, l) }()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentapi.NewClient(testCtx(t), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Version() != 1 {
		t.Fatalf("negotiated %d", c.Version())
	}
	_, err = c.Watch(testCtx(t), "/", false, "")
	if !errors.Is(err, errdefs.ErrNotSupported) || !strings.Contains(err.Error(), "protocol 1") {
		t.Fatalf("watch on a protocol 1 agent: %v", err)
	}
	if _, err := c.Stat(testCtx(t), "/", ""); err != nil {
		t.Errorf("the old protocol still works: %v", err)
	}
}
