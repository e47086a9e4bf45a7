package manager

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

func dur(d time.Duration) *time.Duration { return &d }
func str(s string) *string               { return &s }

// A shortened lifetime ends the running sandbox at its new end, as a
// timeout; an extend-only update never shortens; a lengthened one
// outlives the spec's timeout.
func TestUpdateLifetime(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(sandbox.Spec{Timeout: time.Hour})
	rec, err := e.m.Update(ctx, sb.ID, Update{Timeout: dur(time.Minute), ExtendOnly: true})
	if err != nil || !rec.ExpiresAt().Equal(sb.ExpiresAt()) {
		t.Fatalf("extend-only to a minute moved the end: %v -> %v, %v", sb.ExpiresAt(), rec.ExpiresAt(), err)
	}
	evs, _ := e.m.Events(ctx, sb.ID, 0, 100)
	for _, ev := range evs {
		if ev.Kind == "updated" {
			t.Fatalf("a no-op update was logged: %+v", ev)
		}
	}
	t0 := time.Now()
	rec, err = e.m.Update(ctx, sb.ID, Update{Timeout: dur(1500 * time.Millisecond)})
	if err != nil || rec.ExpiresAt().Before(t0.Add(1500*time.Millisecond)) || rec.ExpiresAt().After(time.Now().Add(1500*time.Millisecond)) {
		t.Fatalf("shortened: %v, %v", rec.ExpiresAt(), err)
	}
	if rec.Spec.Timeout != time.Hour {
		t.Errorf("the spec's timeout changed: %s", rec.Spec.Timeout)
	}
	if code, reason := e.wait(sb.ID); code != 124 || reason != sandbox.EndTimeout {
		t.Fatalf("ended %d %s, want a timeout", code, reason)
	}
	if took := time.Since(t0); took < 1400*time.Millisecond || took > 10*time.Second {
		t.Errorf("ended %s after the update, want about 1.5 s", took)
	}

	short := e.create(sandbox.Spec{Timeout: time.Second})
	if _, err := e.m.Update(ctx, short.ID, Update{Timeout: dur(time.Hour), ExtendOnly: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the spec's timeout passes
	if rec, err := e.m.Get(ctx, short.ID); err != nil || rec.State != sandbox.Running {
		t.Fatalf("an extended sandbox after its spec's timeout: %+v, %v", rec, err)
	}
	if _, err := e.m.Update(ctx, short.ID, Update{Timeout: dur(0)}); err != nil {
		t.Fatal(err)
	}
	if code, reason := e.wait(short.ID); code != 124 || reason != sandbox.EndTimeout {
		t.Fatalf("timeout 0: %d %s", code, reason)
	}
}

// A changed lifetime is in the records: a restarted manager keeps it, and
// one that passed while the daemon was down ends the sandbox as a timeout.
func TestUpdateLifetimeSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	long := e.create(sandbox.Spec{Timeout: 2 * time.Second})
	short := e.create(sandbox.Spec{Timeout: time.Hour})
	if _, err := e.m.Update(ctx, long.ID, Update{Timeout: dur(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Update(ctx, short.ID, Update{Timeout: dur(time.Second)}); err != nil {
		t.Fatal(err)
	}
	e.m.Close()
	time.Sleep(2500 * time.Millisecond) // the shortened lifetime ends while the daemon is down
	e.m = e.open()
	rec, err := e.m.Get(ctx, long.ID)
	if err != nil || rec.State != sandbox.Running || time.Until(rec.ExpiresAt()) < 50*time.Minute {
		t.Fatalf("the extended sandbox after a restart: %+v, %v", rec, err)
	}
	if rec, err := e.m.Get(ctx, short.ID); err != nil || rec.EndReason != sandbox.EndTimeout {
		t.Fatalf("the shortened sandbox after a restart: %+v, %v", rec, err)
	}
}

// Tags merge, and bad updates are refused naming the field before
// anything changes.
func TestUpdateTags(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(sandbox.Spec{Tags: map[string]string{"a": "1", "b": "2"}})
	rec, err := e.m.Update(ctx, sb.ID, Update{Tags: map[string]*string{"a": str("9"), "b": nil, "c": str("3")}})
	if err != nil || len(rec.Spec.Tags) != 2 || rec.Spec.Tags["a"] != "9" || rec.Spec.Tags["c"] != "3" {
		t.Fatalf("merged tags: %v, %v", rec.Spec.Tags, err)
	}
	if stored, _ := e.store.GetSandbox(ctx, sb.ID); stored.Spec.Tags["c"] != "3" {
		t.Errorf("stored tags: %v", stored.Spec.Tags)
	}
	bad := []struct {
		u     Update
		field string
		kind  error
	}{
		{Update{}, "body", errdefs.ErrInvalidArgument},
		{Update{ExtendOnly: true}, "extend_only", errdefs.ErrInvalidArgument},
		{Update{Timeout: dur(-time.Second)}, "timeout", errdefs.ErrInvalidArgument},
		{Update{Timeout: dur(25 * time.Hour)}, "timeout", errdefs.ErrInvalidArgument},
		{Update{Tags: map[string]*string{"corral.pool": str("1")}}, "tags", errdefs.ErrInvalidArgument},
		{Update{Tags: map[string]*string{"bad key": str("1")}}, "tags", errdefs.ErrInvalidArgument},
	}
	for _, b := range bad {
		if _, err := e.m.Update(ctx, sb.ID, b.u); !errors.Is(err, b.kind) || !contains(err, b.field) {
			t.Errorf("update %+v: %v, want %v naming %s", b.u, err, b.kind, b.field)
		}
	}
	if _, err := e.m.Update(ctx, "sb-aaaaaaaaaaaaaaaa", Update{Tags: map[string]*string{}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown sandbox: %v", err)
	}
	if _, err := e.m.Terminate(ctx, sb.ID, sandbox.EndTerminated, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Update(ctx, sb.ID, Update{Timeout: dur(time.Minute)}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("an ended sandbox: %v", err)
	}
}

// A name is unique among live sandboxes and finds its sandbox; once it
// ended the name is free again and finds the newest.
func TestNames(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(sandbox.Spec{Name: "web"})
	if _, err := e.m.Create(ctx, sandbox.Spec{Name: "web", User: selfUser()}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("a second live sandbox named web: %v", err)
	}
	if id, err := e.m.Resolve(ctx, "web"); err != nil || id != sb.ID {
		t.Fatalf("resolve web: %s, %v", id, err)
	}
	for _, ref := range []string{"nope", "../etc", ""} {
		if _, err := e.m.Resolve(ctx, ref); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("resolve %q: %v", ref, err)
		}
	}
	if _, err := e.m.Terminate(ctx, sb.ID, sandbox.EndTerminated, nil); err != nil {
		t.Fatal(err)
	}
	if id, err := e.m.Resolve(ctx, "web"); err != nil || id != sb.ID {
		t.Fatalf("resolve an ended web: %s, %v", id, err)
	}
	again := e.create(sandbox.Spec{Name: "web"})
	if id, err := e.m.Resolve(ctx, "web"); err != nil || id != again.ID {
		t.Fatalf("resolve the new web: %s, %v", id, err)
	}
}

func contains(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}
