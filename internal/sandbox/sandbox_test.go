package sandbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
)

// A lifetime set while running ends d from now; one set while paused ends
// d after the resume; extend-only never moves the end earlier.
func TestSetRemaining(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sb := Sandbox{CreatedAt: t0, Spec: Spec{Timeout: 5 * time.Minute}}
	if got := sb.ExpiresAt(); !got.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("default end %s", got)
	}
	now := t0.Add(time.Minute)
	if !sb.SetRemaining(now, 10*time.Minute, false) || !sb.ExpiresAt().Equal(now.Add(10*time.Minute)) {
		t.Fatalf("extended end %s", sb.ExpiresAt())
	}
	if !sb.SetRemaining(now, time.Minute, false) || !sb.ExpiresAt().Equal(now.Add(time.Minute)) {
		t.Fatalf("shortened end %s", sb.ExpiresAt())
	}
	if sb.SetRemaining(now, 30*time.Second, true) || !sb.ExpiresAt().Equal(now.Add(time.Minute)) {
		t.Fatalf("extend-only shortened the end to %s", sb.ExpiresAt())
	}
	if !sb.SetRemaining(now, 2*time.Minute, true) || !sb.ExpiresAt().Equal(now.Add(2*time.Minute)) {
		t.Fatalf("extend-only did not extend: %s", sb.ExpiresAt())
	}
	if sb.Spec.Timeout != 5*time.Minute {
		t.Errorf("the spec's timeout changed: %s", sb.Spec.Timeout)
	}
	// Paused at t0+2m after 30 s paused before: 3 minutes left from the
	// resume, whenever it comes.
	sb.PausedFor, sb.PausedAt = 30*time.Second, t0.Add(2*time.Minute)
	sb.SetRemaining(t0.Add(time.Hour), 3*time.Minute, false)
	resume := t0.Add(2 * time.Hour)
	sb.PausedFor += resume.Sub(sb.PausedAt)
	sb.PausedAt = time.Time{}
	if got := sb.ExpiresAt(); !got.Equal(resume.Add(3 * time.Minute)) {
		t.Fatalf("end after the resume %s, want %s", got, resume.Add(3*time.Minute))
	}
	// Zero ends it now (not "the spec's timeout").
	if !sb.SetRemaining(resume, 0, false) || sb.ExpiresAt().After(resume.Add(time.Millisecond)) {
		t.Fatalf("zero remaining ends at %s", sb.ExpiresAt())
	}
}

func TestMergeTags(t *testing.T) {
	v := func(s string) *string { return &s }
	got, err := MergeTags(map[string]string{"a": "1", "b": "2", "corral.pool": "x"},
		map[string]*string{"a": v("9"), "b": nil, "c": v("3")})
	if err != nil || len(got) != 3 || got["a"] != "9" || got["c"] != "3" || got["corral.pool"] != "x" {
		t.Fatalf("merged %v, %v", got, err)
	}
	if got, err := MergeTags(map[string]string{"a": "1"}, map[string]*string{"a": nil}); err != nil || got != nil {
		t.Fatalf("removing the last tag: %v, %v", got, err)
	}
	bad := []map[string]*string{
		{"corral.pool": nil},
		{"corral.forked_from": v("x")},
		{"../x": v("1")},
		{"k": v(strings.Repeat("x", 300))},
		{"k": v("a\x00b")},
	}
	for _, p := range bad {
		if _, err := MergeTags(nil, p); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "tags") {
			t.Errorf("patch %v: %v", p, err)
		}
	}
	many := map[string]*string{}
	for i := range 65 {
		many[strings.Repeat("k", i+1)] = v("v")
	}
	if _, err := MergeTags(nil, many); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("65 tags: %v", err)
	}
}
