package api

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// nextEvents reads watch events until want is satisfied or 10 s pass.
func nextEvents(t *testing.T, ws *corral.WatchStream, want func([]apiv1.WatchEvent) bool) []apiv1.WatchEvent {
	t.Helper()
	var got []apiv1.WatchEvent
	done := make(chan error, 1)
	go func() {
		for {
			ev, err := ws.Next()
			if err != nil {
				done <- err
				return
			}
			got = append(got, ev)
			if want(got) {
				done <- nil
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("watch stream: %v (events %+v)", err, got)
		}
	case <-time.After(10 * time.Second):
		ws.Close()
		<-done
		t.Fatalf("timed out; events %+v", got)
	}
	return got
}

func seen(evs []apiv1.WatchEvent, typ, name string) bool {
	for _, ev := range evs {
		if ev.Type == typ && ev.Name == name {
			return true
		}
	}
	return false
}

// A watch through the API sees what the file API does in the sandbox,
// recursively, relative paths start at the workdir, and the end of the
// sandbox ends the stream with an end event.
func TestAPIWatch(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	sb := e.create(apiv1.CreateSandboxRequest{Workdir: "/work", Name: "watched"})
	if _, err := e.c.MakeDir(ctx, sb.ID, "/work/proj"); err != nil {
		t.Fatal(err)
	}
	ws, err := e.c.Watch(ctx, "watched", "proj", true)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if ws.Path != "/work/proj" {
		t.Errorf("watched %q", ws.Path)
	}
	if _, err := e.c.WriteFile(ctx, sb.ID, "proj/a.txt", strings.NewReader("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.MakeDir(ctx, sb.ID, "proj/d/e"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.WriteFile(ctx, sb.ID, "/work/proj/d/e/b.txt", strings.NewReader("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Rename(ctx, sb.ID, "proj/a.txt", "proj/c.txt"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Remove(ctx, sb.ID, "proj/c.txt", false); err != nil {
		t.Fatal(err)
	}
	evs := nextEvents(t, ws, func(evs []apiv1.WatchEvent) bool { return seen(evs, apiv1.WatchRemove, "c.txt") })
	// A write lands in a temporary file renamed over the target: the
	// target's name appears as created.
	for _, want := range [][2]string{{apiv1.WatchCreate, "a.txt"}, {apiv1.WatchCreate, "d"}, {apiv1.WatchCreate, "d/e"},
		{apiv1.WatchCreate, "d/e/b.txt"}, {apiv1.WatchRename, "a.txt"}, {apiv1.WatchCreate, "c.txt"}, {apiv1.WatchRemove, "c.txt"}} {
		if !seen(evs, want[0], want[1]) {
			t.Errorf("no %s of %s in %+v", want[0], want[1], evs)
		}
	}
	if _, err := e.c.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	evs = nextEvents(t, ws, func(evs []apiv1.WatchEvent) bool { return evs[len(evs)-1].Type == apiv1.WatchEnd })
	if end := evs[len(evs)-1]; end.Type != apiv1.WatchEnd || !strings.Contains(end.Error, "went away") {
		t.Errorf("the stream after terminate: %+v", evs)
	}
}

// Bad watches are 4xx naming the problem; an old agent's sandbox says
// what it lacks and keeps working otherwise.
func TestAPIWatchBadInput(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	sb := e.create(apiv1.CreateSandboxRequest{})
	if _, err := e.c.WriteFile(ctx, sb.ID, "/tmp/file", strings.NewReader("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := "/v1/sandboxes/" + sb.ID + "/files/watch"
	for _, tt := range []struct {
		query  string
		status int
		want   string
	}{
		{"?path=/no/such/dir", 404, "/no/such/dir"},
		{"?path=/tmp/file", 400, "not a directory"},
		{"", 400, "path"},
		{"?path=/tmp&recursive=maybe", 400, "recursive"},
		{"?path=/tmp&user=" + strings.Repeat("u", 65), 400, "user"},
	} {
		if status, body := e.raw("GET", p+tt.query, ""); status != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s: %d %s, want %d naming %s", tt.query, status, body, tt.status, tt.want)
		}
	}
	e.rt.AgentProtocols(1)
	old := e.create(apiv1.CreateSandboxRequest{})
	_, err := e.c.Watch(ctx, old.ID, "/", false)
	if !isCode(err, "not_supported") || !strings.Contains(err.Error(), "protocol 1") || !strings.Contains(err.Error(), old.ID) {
		t.Fatalf("watch in a sandbox with a protocol 1 agent: %v", err)
	}
	if out, code := e.run(old.ID, apiv1.ExecRequest{Cmd: []string{"echo", "still"}}); out != "still\n" || code != 0 {
		t.Errorf("exec in the old agent's sandbox: %q %d", out, code)
	}
}
