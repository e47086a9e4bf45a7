package manager

import (
	"context"
	"io"
	"os"

	"corral/internal/agentapi"
)

// WriteWith is Write with agentapi.WriteOptions: in place, and extended
// attributes set on the written file. A sandbox whose agent predates
// them (agentapi.XattrsSince, frozen in an older image or snapshot) gets
// the write without them: the answer says XattrsUnsupported, and the
// daemon's log names the agent when the set had values (an empty set,
// which clears, has nothing to lose with an agent that never set any).
func (s Files) WriteWith(ctx context.Context, id, path string, r io.Reader, mode os.FileMode, user string, opt agentapi.WriteOptions) (agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return agentapi.EntryInfo{}, err
	}
	defer t.release()
	tooOld := opt.Xattrs != nil && t.agent.Version() < agentapi.XattrsSince
	dropped := 0
	if tooOld {
		dropped, opt.Xattrs = len(opt.Xattrs.Values), nil
	}
	info, err := t.agent.WriteFileWith(ctx, t.path, r, mode, t.user, opt)
	if err == nil && tooOld {
		info.XattrsUnsupported = true
	}
	if err == nil && dropped > 0 {
		s.m.log.Warn("extended attributes not written: the sandbox's agent is older than protocol 4",
			"sandbox", id, "agent", t.agent.AgentVersion(), "protocol", t.agent.Version(), "dropped", dropped)
	}
	return info, err
}

// StatXattrs is Stat with the entry's extended attributes under prefix
// (none from an agent older than agentapi.XattrsSince).
func (s Files) StatXattrs(ctx context.Context, id, path, user, prefix string) (agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return agentapi.EntryInfo{}, err
	}
	defer t.release()
	return t.agent.StatXattrs(ctx, t.path, t.user, prefix)
}

// ListXattrs is List with each entry's extended attributes under prefix.
func (s Files) ListXattrs(ctx context.Context, id, path string, depth int, user, prefix string) ([]agentapi.EntryInfo, error) {
	t, err := s.open(ctx, id, path, user)
	if err != nil {
		return nil, err
	}
	defer t.release()
	return t.agent.ListDirXattrs(ctx, t.path, depth, t.user, prefix)
}
