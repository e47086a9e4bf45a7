package manager

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/sandbox"
)

// Update is a change of a live sandbox's settings: the fields given are
// changed together, in one write with one event.
type Update struct {
	// Timeout, when set, makes the lifetime end this long from now (for a
	// paused sandbox, this long after it resumes: paused time does not
	// count), earlier or later than it would have; zero ends it now, as a
	// timeout. At most sandbox.MaxTimeout.
	Timeout *time.Duration
	// ExtendOnly keeps a lifetime that already ends later than Timeout
	// would make it end (what a reconnecting client wants: never cut a
	// sandbox's life short).
	ExtendOnly bool
	// Tags is a merge patch of the tags (sandbox.MergeTags): a value sets
	// a tag, nil removes it, others stay. Corral's own ("corral.*") are
	// refused.
	Tags map[string]*string
}

// validate checks an update before any sandbox is touched.
func (u Update) validate() error {
	if u.ExtendOnly && u.Timeout == nil {
		return errdefs.Invalid("extend_only", "needs a timeout")
	}
	if u.Timeout == nil && u.Tags == nil {
		return errdefs.Invalid("body", "nothing to update: give timeout or tags")
	}
	if t := u.Timeout; t != nil && (*t < 0 || *t > sandbox.MaxTimeout) {
		return errdefs.Invalid("timeout", "must be between 0 and %s, got %s", sandbox.MaxTimeout, *t)
	}
	return nil
}

// Update changes a running or paused sandbox's lifetime and tags. The
// record is persisted before it returns (so the new lifetime survives a
// daemon restart) and the watcher applies the new end at once. An update
// that changes nothing (an extend-only timeout ending earlier than the
// lifetime does) writes nothing and returns the record.
func (m *Manager) Update(ctx context.Context, id string, u Update) (*sandbox.Sandbox, error) {
	if err := u.validate(); err != nil {
		return nil, err
	}
	h, ended, err := m.lockLive(ctx, id)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: sandbox %s has ended (%s)", errdefs.ErrFailedPrecondition, id, ended.State)
	}
	defer h.Unlock()
	rec := h.Record()
	if pooled(rec) {
		return nil, fmt.Errorf("%w: sandbox %q", errdefs.ErrNotFound, id)
	}
	if rec.State != sandbox.Running && rec.State != sandbox.Paused {
		return nil, fmt.Errorf("%w: sandbox %s is %s", errdefs.ErrFailedPrecondition, id, rec.State)
	}
	next, fields, err := applyUpdate(rec, u, time.Now())
	if err != nil || fields == nil {
		return rec, err
	}
	out, err := h.Apply(ctx, handle.Change{
		Edit:  func(s *sandbox.Sandbox) { s.Lifetime, s.Spec.Tags = next.Lifetime, next.Spec.Tags },
		Event: &handle.Event{Kind: "updated", Message: "sandbox updated", Fields: fields},
	})
	if err != nil {
		return nil, err
	}
	if _, ok := fields["expires_at"]; ok {
		h.LifetimeChanged()
	}
	return out, nil
}

// applyUpdate returns rec with u applied at now, and the event's fields
// (nil: nothing changed).
func applyUpdate(rec *sandbox.Sandbox, u Update, now time.Time) (*sandbox.Sandbox, map[string]string, error) {
	next := *rec
	fields := map[string]string{}
	if u.Tags != nil {
		tags, err := sandbox.MergeTags(rec.Spec.Tags, u.Tags)
		if err != nil {
			return nil, nil, err
		}
		if !maps.Equal(tags, rec.Spec.Tags) {
			next.Spec.Tags = tags
			fields["tags"] = strconv.Itoa(len(tags))
		}
	}
	if u.Timeout != nil && next.SetRemaining(now, *u.Timeout, u.ExtendOnly) {
		fields["timeout"] = u.Timeout.String()
		fields["expires_at"] = next.ExpiresAt().Format(time.RFC3339Nano)
	}
	if len(fields) == 0 {
		return rec, nil, nil
	}
	return &next, fields, nil
}

// pooled reports whether rec is a sandbox waiting in a warm pool: not the
// API's to see or change.
func pooled(rec *sandbox.Sandbox) bool {
	return rec.Spec.Tags[poolTag] != "" && !rec.State.Terminal()
}
