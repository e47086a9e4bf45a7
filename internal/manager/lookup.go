package manager

import (
	"context"
	"fmt"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/manager/handle"
	"corral/internal/records"
	"corral/internal/sandbox"
)

// Resolve returns the id of the sandbox ref names: ref itself when it is
// an id (whether or not such a sandbox exists), else the live sandbox
// named ref, else the newest ended one of that name. A name is unique
// among live sandboxes (Create refuses a second) and never shaped like an
// id, so this is unambiguous for live sandboxes.
func (m *Manager) Resolve(ctx context.Context, ref string) (string, error) {
	if ids.Sandbox(ref) {
		return ref, nil
	}
	if !sandbox.ValidName(ref) {
		return "", fmt.Errorf("%w: %q is neither a sandbox id nor a sandbox name", errdefs.ErrNotFound, truncated(ref))
	}
	if h := m.liveNamed(ref); h != nil {
		return h.ID(), nil
	}
	return m.records.SandboxIDByName(ctx, ref)
}

// truncated keeps a hostile reference short in messages.
func truncated(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// reserveName holds name for a create until release, refusing it while a
// live sandbox (or another create) has it.
func (m *Manager) reserveName(name string) (release func(), err error) {
	if name == "" {
		return func() {}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.creatingNames[name] {
		return nil, fmt.Errorf("%w: a sandbox named %q is being created", errdefs.ErrAlreadyExists, name)
	}
	if h := m.liveNamedLocked(name); h != nil {
		return nil, fmt.Errorf("%w: sandbox %s is named %q", errdefs.ErrAlreadyExists, h.ID(), name)
	}
	m.creatingNames[name] = true
	return func() {
		m.mu.Lock()
		delete(m.creatingNames, name)
		m.mu.Unlock()
	}, nil
}

// liveNamed returns the handle of the live sandbox named name, or nil.
func (m *Manager) liveNamed(name string) *handle.Handle {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.liveNamedLocked(name)
}

// liveNamedLocked is liveNamed under m.mu. Should two live sandboxes
// share a name (records of a daemon from before names were unique), the
// newest wins.
func (m *Manager) liveNamedLocked(name string) *handle.Handle {
	var found *handle.Handle
	var created time.Time
	for _, h := range m.handles {
		if h.Name() != name {
			continue
		}
		if c := h.Record().CreatedAt; found == nil || c.After(created) {
			found, created = h, c
		}
	}
	return found
}

// ListOptions select a page of sandboxes (ListPage).
type ListOptions struct {
	// States keeps sandboxes in any of these states; empty keeps all.
	States []sandbox.State
	// Tags keeps sandboxes with every one of these tags ("" as a value:
	// the key is present, whatever its value).
	Tags map[string]string
	// Limit bounds the page: 1 to MaxListLimit; zero means MaxListLimit.
	Limit int
	// Next is the token of the previous page ("" starts at the oldest,
	// or with Desc the newest).
	Next string
	// Desc lists newest first.
	Desc bool
	// StartedAfter, when set, keeps sandboxes started at or after it.
	StartedAfter time.Time
	// Origin, when set, keeps sandboxes of this origin: tag OriginTag's
	// value, else the snapshot restored, else the image.
	Origin, OriginTag string
}

// MaxListLimit bounds one page of a listing.
const MaxListLimit = 1000

// ListPage returns a page of sandbox records, oldest first or with o.Desc
// newest first (live ones as
// they are now, warm pool sandboxes left out), and the token of the next
// page ("" when this is the last). The token is a position, not an
// offset: sandboxes created after it come on later pages, and removed ones
// shift nothing.
func (m *Manager) ListPage(ctx context.Context, o ListOptions) ([]*sandbox.Sandbox, string, error) {
	if o.Limit < 0 || o.Limit > MaxListLimit {
		return nil, "", errdefs.Invalid("limit", "must be between 1 and %d, got %d", MaxListLimit, o.Limit)
	}
	if o.Limit == 0 {
		o.Limit = MaxListLimit
	}
	for _, st := range o.States {
		if !st.Valid() {
			return nil, "", errdefs.Invalid("state", "unknown state %q", st)
		}
	}
	after, err := records.ParseCursor("next", o.Next)
	if err != nil {
		return nil, "", err
	}
	recs, next, err := m.records.ListSandboxPage(ctx, records.SandboxFilter{States: o.States, Tags: o.Tags,
		HideLiveTag: poolTag, After: after, Limit: o.Limit, Desc: o.Desc, StartedAfter: o.StartedAfter,
		Origin: o.Origin, OriginTag: o.OriginTag})
	if err != nil {
		return nil, "", err
	}
	for i, r := range recs {
		if h := m.lookup(r.ID); h != nil {
			recs[i] = h.Record()
		}
	}
	return recs, next.String(), nil
}
