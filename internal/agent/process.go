package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// After the process exits, its output is read until the pipes are idle for
// drainGrace (what it wrote before exiting is already in the pipe and comes
// at once) or until maxAfterExit more bytes have come: a background child
// may hold the pipe open, or keep writing, for ever, and the end event must
// not wait for it. Output the process itself wrote never exceeds a pipe's
// capacity (1 MiB at most for an unprivileged process) after its exit.
const (
	drainGrace   = 200 * time.Millisecond
	maxAfterExit = 2 << 20
)

// process is one process started by the agent, the leader of its own
// process group (pgid == pid).
type process struct {
	info    agentapi.ProcessInfo
	out     *hub
	log     *slog.Logger
	console io.Writer // nil unless the process was started with Log

	// stdinMu guards stdin; stdinSem lets one request write at a time.
	stdinMu  sync.Mutex
	stdin    *os.File // pipe write end, or the PTY master; nil once closed
	stdinSem chan struct{}
	ptmx     *os.File // the PTY master, nil without a PTY

	exited   chan struct{} // closed by the reaper callback
	status   unix.WaitStatus
	timedOut atomic.Bool
	timer    *time.Timer
	// tree is the KillTree marker (killtree.go); empty: signals reach
	// the process group only.
	tree string
	// oomBefore is oomKills() when the process started.
	oomBefore uint64

	done chan struct{} // closed once end is set and the output is over
	end  agentapi.Event
}

func (p *process) pid() int { return p.info.PID }

// onExit is the reaper's callback.
func (p *process) onExit(ws unix.WaitStatus) {
	p.status = ws
	close(p.exited)
}

// supervise streams the output readers into the hub until the process has
// exited and its output is drained, then publishes the end.
func (p *process) supervise(readers []*os.File, types []string, retire func(*process)) {
	var wg sync.WaitGroup
	for i, f := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.pump(f, types[i])
		}()
	}
	<-p.exited
	if p.timer != nil {
		p.timer.Stop()
	}
	for _, f := range readers {
		// Wake a pump blocked on an idle pipe; it re-arms after each read.
		if err := f.SetReadDeadline(time.Now().Add(drainGrace)); err != nil {
			f.Close() // not pollable: closing is the only way to stop the read
		}
	}
	wg.Wait()
	for _, f := range readers {
		f.Close()
	}
	p.closeStdin()
	p.end = p.endEvent()
	p.out.finish()
	close(p.done)
	retire(p)
	p.log.Debug("process ended", "op", "process", "pid", p.pid(), "exit_code", p.end.ExitCode,
		"signal", p.end.Signal, "timed_out", p.end.TimedOut)
}

// pump reads one output stream in chunks of at most MaxChunk, until EOF or,
// once the process has exited, until the pipe is idle or the budget spent.
func (p *process) pump(f *os.File, typ string) {
	buf := make([]byte, agentapi.MaxChunk)
	afterExit := 0
	for {
		if !p.running() {
			if afterExit >= maxAfterExit {
				return
			}
			_ = f.SetReadDeadline(time.Now().Add(drainGrace))
		}
		n, err := f.Read(buf)
		if !p.running() {
			afterExit += n
		}
		if n > 0 {
			data := append([]byte(nil), buf[:n]...)
			if p.console != nil {
				_, _ = p.console.Write(data)
			}
			p.out.publish(agentapi.Event{Type: typ, Data: data})
		}
		if err != nil {
			return // EOF, EIO from a PTY whose slave closed, or the deadline
		}
	}
}

// endEvent follows the shell: the exit status, 128+N for signal N, 124 when
// the timeout fired.
func (p *process) endEvent() agentapi.Event {
	ev := agentapi.Event{Type: agentapi.EventEnd}
	switch {
	case p.status.Exited():
		ev.ExitCode = p.status.ExitStatus()
	case p.status.Signaled():
		ev.ExitCode = 128 + int(p.status.Signal())
		ev.Signal = unix.SignalName(p.status.Signal())
	}
	if ev.ExitCode == 128+int(unix.SIGKILL) && oomKills() > p.oomBefore {
		ev.OOMKilled = true
	}
	if p.timedOut.Load() {
		ev.ExitCode = agentapi.ExitCodeTimeout
		ev.TimedOut = true
	}
	return ev
}

// startTimeout SIGKILLs the process group (with KillTree: the tree) once
// d has passed.
func (p *process) startTimeout(d time.Duration) {
	p.timer = time.AfterFunc(d, func() {
		select {
		case <-p.exited:
			return
		default:
		}
		p.timedOut.Store(true)
		if err := p.kill(unix.SIGKILL); err != nil {
			p.log.Debug("timeout kill failed", "op", "process", "pid", p.pid(), "err", err)
		}
	})
}

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends sig to the process group, or with KillTree to the tree.
func (p *process) kill(sig unix.Signal) error {
	if p.tree != "" {
		return signalTree(p.pid(), p.tree, sig)
	}
	return unix.Kill(-p.pid(), sig)
}

// signal sends sig to the process group (with KillTree: the tree).
func (p *process) signal(sig unix.Signal) error {
	if !p.running() {
		return fmt.Errorf("%w: process %d has exited", errdefs.ErrNotFound, p.pid())
	}
	if err := p.kill(sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("%w: process %d has exited", errdefs.ErrNotFound, p.pid())
		}
		return fmt.Errorf("signalling process group %d: %w", p.pid(), err)
	}
	return nil
}

// stdinFile returns where stdin writes go, or an error when there is none.
func (p *process) stdinFile() (*os.File, error) {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return nil, fmt.Errorf("%w: process %d has no open stdin", errdefs.ErrFailedPrecondition, p.pid())
	}
	return p.stdin, nil
}

// closeStdin closes the stdin pipe (the PTY master stays open for output).
func (p *process) closeStdin() {
	p.stdinMu.Lock()
	f := p.stdin
	p.stdin = nil
	p.stdinMu.Unlock()
	if f != nil && f != p.ptmx {
		f.Close()
	}
}

// writeStdin copies body to the process's stdin. A cancelled ctx interrupts
// a write that the process is not reading.
func (p *process) writeStdin(ctx context.Context, body io.Reader) error {
	select {
	case p.stdinSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.stdinSem }()
	f, err := p.stdinFile()
	if err != nil {
		return err
	}
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(interrupted)
		_ = f.SetWriteDeadline(time.Unix(1, 0))
	})
	_, err = io.Copy(f, body)
	if !stop() {
		<-interrupted
		_ = f.SetWriteDeadline(time.Time{})
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, unix.EPIPE), errors.Is(err, os.ErrClosed), errors.Is(err, unix.EIO):
		return fmt.Errorf("%w: process %d no longer reads its stdin", errdefs.ErrFailedPrecondition, p.pid())
	default:
		return fmt.Errorf("writing stdin of process %d: %w", p.pid(), err)
	}
}

// sendEOF ends a PTY's input the way a terminal does: ^D (effective at
// the start of a line in canonical mode).
func (p *process) sendEOF() error {
	f, err := p.stdinFile()
	if err != nil {
		return err
	}
	select {
	case p.stdinSem <- struct{}{}:
		defer func() { <-p.stdinSem }()
	default:
		return fmt.Errorf("%w: a stdin write to process %d is in progress", errdefs.ErrFailedPrecondition, p.pid())
	}
	_ = f.SetWriteDeadline(time.Now().Add(time.Second))
	defer func() { _ = f.SetWriteDeadline(time.Time{}) }()
	if _, err := f.Write([]byte{4}); err != nil {
		return fmt.Errorf("%w: writing EOF to terminal of process %d: %v", errdefs.ErrFailedPrecondition, p.pid(), err)
	}
	return nil
}
