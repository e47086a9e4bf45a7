package sandboxlog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The log lines' budget of one sandbox: LogBurst lines at once, then one
// every 1/LogRate seconds; the lines held back are counted and told in one
// line per Window (the "sandbox log lines held back" line). Worst case per
// sandbox and hour: LogBurst + LogRate*3600 lines and 3600/Window tellings.
const (
	LogBurst = 50
	LogRate  = 0.2
)

// LogBudget is a slog.Handler that holds each sandbox to its log budget: a
// line whose attributes (its own, or those the logger was made With) name
// a sandbox under the key "sandbox" takes a token from that sandbox's
// bucket, or is held back and counted. Lines naming no sandbox pass.
type LogBudget struct {
	inner   slog.Handler
	sandbox string // named by WithAttrs, before any group
	grouped bool   // attributes now go into a group: not the top-level key
	st      *logState
}

type logState struct {
	mu    sync.Mutex
	root  slog.Handler // where tellings go
	accts map[string]*logAccount
}

type logAccount struct {
	tokens float64
	last   time.Time
	held   int
	since  time.Time // of the first line held back since the last telling
	level  slog.Level
}

// NewLogBudget wraps h.
func NewLogBudget(h slog.Handler) *LogBudget {
	return &LogBudget{inner: h, st: &logState{root: h, accts: map[string]*logAccount{}}}
}

// Enabled implements slog.Handler.
func (b *LogBudget) Enabled(ctx context.Context, l slog.Level) bool { return b.inner.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (b *LogBudget) Handle(ctx context.Context, r slog.Record) error {
	id := b.sandbox
	if id == "" && !b.grouped {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "sandbox" {
				id = a.Value.String()
				return false
			}
			return true
		})
	}
	if id != "" && !b.st.allow(id, r.Level, time.Now()) {
		return nil
	}
	return b.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (b *LogBudget) WithAttrs(as []slog.Attr) slog.Handler {
	c := *b
	c.inner = b.inner.WithAttrs(as)
	if !b.grouped {
		for _, a := range as {
			if a.Key == "sandbox" {
				c.sandbox = a.Value.String()
			}
		}
	}
	return &c
}

// WithGroup implements slog.Handler.
func (b *LogBudget) WithGroup(name string) slog.Handler {
	c := *b
	c.inner = b.inner.WithGroup(name)
	c.grouped = true
	return &c
}

func (s *logState) allow(id string, l slog.Level, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accts[id]
	if a == nil {
		a = &logAccount{tokens: LogBurst, last: now}
		s.accts[id] = a
	}
	a.tokens = min(LogBurst, a.tokens+now.Sub(a.last).Seconds()*LogRate)
	a.last = now
	if a.tokens >= 1 {
		a.tokens--
		return true
	}
	if a.held == 0 {
		a.since, a.level = now, l
	}
	a.held++
	a.level = max(a.level, l)
	return false
}

// tell writes one line for each sandbox whose held-back lines have waited
// a Window (every one, when all is set), and forgets quiet sandboxes.
func (b *LogBudget) tell(now time.Time, all bool) {
	s := b.st
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, a := range s.accts {
		if a.held > 0 && (all || now.Sub(a.since) >= Window) {
			r := slog.NewRecord(now, a.level, "sandbox log lines held back: over its log budget", 0)
			r.AddAttrs(slog.String("sandbox", id), slog.Int("held", a.held), slog.Time("since", a.since),
				slog.Int("burst", LogBurst), slog.Float64("per_second", LogRate))
			_ = s.root.Handle(context.Background(), r)
			a.held, a.level = 0, 0
		}
		if a.held == 0 && now.Sub(a.last) > time.Duration(LogBurst/LogRate)*time.Second {
			delete(s.accts, id)
		}
	}
}
