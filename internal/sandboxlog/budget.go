package sandboxlog

import (
	"sync"
	"time"
)

// The budget of one sandbox. Worst case a sandbox makes the host keep, per
// hour: Burst once, then Rate*3600 detailed records (each an event and an
// audit entry of at most MaxRecordBytes), 3600/Window fold reports (each
// at most MaxReportBytes), EvidencePerWindow*3600/Window protected
// denials, and its milestones; docs/SECURITY.md turns it into bytes.
const (
	Burst  = 200
	Rate   = 2
	Window = 10 * time.Second
	// TopKeys is how many fold keys a report names by count.
	TopKeys = 16
	// EvidencePerWindow bounds the protected denials detailed in a window
	// beyond the bucket.
	EvidencePerWindow = 10
	// trackedKeys is how many fold keys a window counts exactly or nearly
	// (space-saving: a new key past it takes the least counted one's
	// place, so a key counted often is never pushed out by a stream of
	// new ones).
	trackedKeys = 64
	// evidenceKeys bounds the protected destinations a window names.
	evidenceKeys = 32
	// maxKey bounds a fold key's text, as JSON.
	maxKey = 120
)

// class is how the budget treats a record.
type class int

const (
	// ordinary records take a token or are folded.
	ordinary class = iota
	// milestone records are written whatever the bucket holds, and take a
	// token when there is one.
	milestone
	// evidence records (protected denials) are detailed up to
	// EvidencePerWindow a window, whatever the bucket holds.
	evidence
)

// account is one sandbox's bucket, evidence allowance and open fold window.
type account struct {
	tokens   float64
	last     time.Time // of the last refill
	used     time.Time // of the last record
	evStart  time.Time // of the evidence window
	evidence int       // detailed in it
	fold     *window   // nil: no fold open
}

// budget holds every sandbox's account.
type budget struct {
	mu       sync.Mutex
	accounts map[string]*account
}

func newBudget() *budget { return &budget{accounts: map[string]*account{}} }

func (b *budget) account(id string, now time.Time) *account {
	a := b.accounts[id]
	if a == nil {
		a = &account{tokens: Burst, last: now}
		b.accounts[id] = a
	}
	a.tokens = min(Burst, a.tokens+now.Sub(a.last).Seconds()*Rate)
	a.last, a.used = now, now
	return a
}

// take says whether a record of sandbox id and class c is written in
// detail now; when it is not, the caller folds it.
func (b *budget) take(id string, c class, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.account(id, now)
	switch c {
	case milestone:
		a.tokens = max(0, a.tokens-1)
		return true
	case evidence:
		if now.Sub(a.evStart) >= Window {
			a.evStart, a.evidence = now, 0
		}
		if a.evidence < EvidencePerWindow {
			a.evidence++
			return true
		}
		return false
	}
	if a.tokens >= 1 {
		a.tokens--
		return true
	}
	return false
}

// fold counts a record of sandbox id that is not written: its kind, its
// fold key, and whether it is evidence.
func (b *budget) fold(id, kind, key string, protected bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.account(id, now)
	if a.fold == nil {
		a.fold = newWindow(now)
	}
	a.fold.add(kind, key, protected)
}

// due takes the reports of the windows ended by now (all of them when
// every is set: the daemon is stopping), and forgets the accounts of
// sandboxes quiet long enough to have refilled.
func (b *budget) due(now time.Time, every bool) []report {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []report
	for id, a := range b.accounts {
		if w := a.fold; w != nil && (every || now.Sub(w.start) >= Window) {
			out = append(out, w.report(id, now))
			a.fold = nil
		}
		if a.fold == nil && now.Sub(a.used) > time.Duration(Burst/Rate)*time.Second {
			delete(b.accounts, id)
		}
	}
	return out
}

// window counts one sandbox's folded records from start.
type window struct {
	start     time.Time
	folded    int
	kinds     map[string]int
	keys      topK
	protected map[string]int
	// protectedOther counts folded evidence past evidenceKeys names.
	protectedOther int
}

func newWindow(now time.Time) *window {
	return &window{start: now, kinds: map[string]int{}, keys: topK{size: trackedKeys}, protected: map[string]int{}}
}

func (w *window) add(kind, key string, protected bool) {
	w.folded++
	w.kinds[kind]++
	key = cutJSON(key, maxKey)
	if protected {
		if _, ok := w.protected[key]; ok || len(w.protected) < evidenceKeys {
			w.protected[key]++
		} else {
			w.protectedOther++
		}
		return
	}
	w.keys.add(key)
}
