package agent

import (
	"fmt"
	"sync"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// Output bounds.
const (
	// maxBacklog bounds the output kept while nobody is attached.
	maxBacklog = 256 << 10
	// eventOverhead is what one buffered event costs beyond its data, so
	// that a flood of one-byte writes is bounded too.
	eventOverhead = 64
	// maxSubscribers bounds the streams attached to one process.
	maxSubscribers = 64
	// subscriberBuffer is how many events may wait for a slow subscriber
	// before the process's output pipe, and then the process, is held up.
	subscriberBuffer = 8
)

// hub fans a process's output out to the streams attached to it. Delivery
// applies backpressure: a publisher waits for every current subscriber,
// so a slow reader slows the process (as a pipe would) but nothing else.
// While nobody is attached, output goes to a bounded backlog (oldest dropped)
// that the next subscriber receives first.
type hub struct {
	mu           sync.Mutex
	subs         map[*subscriber]struct{}
	backlog      []agentapi.Event
	backlogBytes int
	finished     bool
}

// subscriber is one attached stream. ch is closed by finish, after the last
// output event; gone is closed when the stream detaches.
type subscriber struct {
	ch   chan agentapi.Event
	gone chan struct{}
	once sync.Once
}

func newHub() *hub {
	return &hub{subs: make(map[*subscriber]struct{})}
}

// subscribe attaches a stream and hands it the backlog. On a finished hub
// the subscriber's channel is already closed.
func (h *hub) subscribe() (*subscriber, []agentapi.Event, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) >= maxSubscribers {
		return nil, nil, fmt.Errorf("%w: more than %d streams attached to one process",
			errdefs.ErrResourceExhausted, maxSubscribers)
	}
	sub := &subscriber{ch: make(chan agentapi.Event, subscriberBuffer), gone: make(chan struct{})}
	backlog := h.backlog
	h.backlog, h.backlogBytes = nil, 0
	if h.finished {
		close(sub.ch)
	} else {
		h.subs[sub] = struct{}{}
	}
	return sub, backlog, nil
}

// unsubscribe detaches a stream; a publisher blocked on it moves on. Events
// still buffered for it go back to the backlog when nobody else is attached,
// so that a caller who detaches and re-attaches loses as little as possible.
func (h *hub) unsubscribe(sub *subscriber) {
	sub.once.Do(func() { close(sub.gone) })
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[sub]; !ok {
		return
	}
	delete(h.subs, sub)
	if len(h.subs) > 0 {
		return
	}
	pending := drain(sub.ch)
	if len(pending) == 0 {
		return
	}
	later := h.backlog
	h.backlog, h.backlogBytes = nil, 0
	for _, ev := range append(pending, later...) {
		h.appendBacklog(ev)
	}
}

// drain takes what is buffered in ch without waiting.
func drain(ch chan agentapi.Event) []agentapi.Event {
	var out []agentapi.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}

// publish delivers ev to every current subscriber, waiting for each, or to
// the backlog when none takes it.
func (h *hub) publish(ev agentapi.Event) {
	h.mu.Lock()
	subs := make([]*subscriber, 0, len(h.subs))
	for sub := range h.subs {
		subs = append(subs, sub)
	}
	if len(subs) == 0 {
		h.appendBacklog(ev)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	delivered := false
	for _, sub := range subs {
		select {
		case sub.ch <- ev:
			delivered = true
		case <-sub.gone:
		}
	}
	if !delivered {
		h.mu.Lock()
		h.appendBacklog(ev)
		h.mu.Unlock()
	}
}

// appendBacklog keeps ev, merging it into the previous event of the same
// type when that fits in one chunk, and drops the oldest output beyond
// maxBacklog. h.mu is held.
func (h *hub) appendBacklog(ev agentapi.Event) {
	if n := len(h.backlog); n > 0 {
		last := &h.backlog[n-1]
		if last.Type == ev.Type && len(last.Data)+len(ev.Data) <= agentapi.MaxChunk {
			last.Data = append(last.Data, ev.Data...)
			h.backlogBytes += len(ev.Data)
			h.trimBacklog()
			return
		}
	}
	h.backlog = append(h.backlog, ev)
	h.backlogBytes += len(ev.Data) + eventOverhead
	h.trimBacklog()
}

func (h *hub) trimBacklog() {
	drop := 0
	for h.backlogBytes > maxBacklog && drop < len(h.backlog) {
		h.backlogBytes -= len(h.backlog[drop].Data) + eventOverhead
		drop++
	}
	if drop > 0 {
		h.backlog = append([]agentapi.Event(nil), h.backlog[drop:]...)
	}
}

// finish ends every subscriber's channel. It is called once, after the last
// publish has returned.
func (h *hub) finish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.finished = true
	for sub := range h.subs {
		close(sub.ch)
	}
	clear(h.subs)
}
