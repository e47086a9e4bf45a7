package agent

import (
	"fmt"
	"slices"
	"sync"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// Process table bounds.
const (
	// maxProcesses bounds the processes the agent supervises at once.
	maxProcesses = 4096
	// maxEnded is how many ended processes are remembered, so that a caller
	// who reconnects after the end still gets the end event (and output
	// nobody received).
	maxEnded = 32
	// maxTagLen bounds a process tag.
	maxTagLen = 256
)

// table is the sandbox's process table, shared by every connection.
type table struct {
	mu      sync.Mutex
	running map[int]*process
	tags    map[string]*process // running processes with a tag
	ended   []*process          // oldest first
}

func newTable() *table {
	return &table{running: make(map[int]*process), tags: make(map[string]*process)}
}

// add starts a process with spawn and registers it, with the table locked so
// that tag uniqueness and the process bound hold.
func (t *table) add(tag string, spawn func() (*process, error)) (*process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tag != "" && t.tags[tag] != nil {
		return nil, fmt.Errorf("%w: a running process is tagged %q", errdefs.ErrAlreadyExists, tag)
	}
	if len(t.running) >= maxProcesses {
		return nil, fmt.Errorf("%w: %d processes running", errdefs.ErrResourceExhausted, maxProcesses)
	}
	p, err := spawn()
	if err != nil {
		return nil, err
	}
	t.running[p.pid()] = p
	if tag != "" {
		t.tags[tag] = p
	}
	return p, nil
}

// retire moves an ended process to the bounded list of ended ones.
func (t *table) retire(p *process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[p.pid()] == p {
		delete(t.running, p.pid())
	}
	if p.info.Tag != "" && t.tags[p.info.Tag] == p {
		delete(t.tags, p.info.Tag)
	}
	t.ended = append(t.ended, p)
	if len(t.ended) > maxEnded {
		t.ended = slices.Delete(t.ended, 0, len(t.ended)-maxEnded)
	}
}

// getRunning returns a running process by pid.
func (t *table) getRunning(pid int) (*process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.running[pid]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: no running process %d", errdefs.ErrNotFound, pid)
}

// find returns a process by pid (when pid > 0) or tag, running or recently
// ended; the running one wins.
func (t *table) find(pid int, tag string) (*process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	match := func(p *process) bool {
		if pid > 0 {
			return p.pid() == pid
		}
		return p.info.Tag == tag
	}
	if pid > 0 && t.running[pid] != nil {
		return t.running[pid], nil
	}
	if pid <= 0 && t.tags[tag] != nil {
		return t.tags[tag], nil
	}
	for i := len(t.ended) - 1; i >= 0; i-- {
		if match(t.ended[i]) {
			return t.ended[i], nil
		}
	}
	if pid > 0 {
		return nil, fmt.Errorf("%w: no process %d", errdefs.ErrNotFound, pid)
	}
	return nil, fmt.Errorf("%w: no process tagged %q", errdefs.ErrNotFound, tag)
}

// list describes the running processes, by pid.
func (t *table) list() []agentapi.ProcessInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]agentapi.ProcessInfo, 0, len(t.running))
	for _, p := range t.running {
		if p.running() { // not one that exited and is draining its output
			out = append(out, p.info)
		}
	}
	slices.SortFunc(out, func(a, b agentapi.ProcessInfo) int { return a.PID - b.PID })
	return out
}

// pgids returns the process groups of the running processes.
func (t *table) pgids() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int, 0, len(t.running))
	for pid := range t.running {
		out = append(out, pid)
	}
	return out
}
