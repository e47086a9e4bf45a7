package api

import (
	"context"
	"time"

	"corral/internal/sandbox"
)

// endKnownWithin bounds how long an exec stream lost with its sandbox's
// agent waits for the daemon to name the sandbox's end. The watcher asks
// the runtime for its state and then the cause, about a second on an idle
// host; on a loaded one (a CI run's, 8 runnable tasks a core) 3 s, then
// 10 s (a gVisor OOM end named after 10.25 s), were seen not to be
// enough, and a lost stream is rare enough that waiting longer for the
// true cause beats a guess.
const endKnownWithin = 30 * time.Second

// lostProcess is the error of an exec or attach stream lost because
// sandbox id's agent went away (err): the sandbox's end and its cause
// when the daemon names one in time ("the sandbox ended: out of memory
// (the sandbox's memory limit is 128 MiB)"), otherwise a guess.
func (s *Server) lostProcess(ctx context.Context, id string, err error) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endKnownWithin)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		rec, gerr := s.m.Get(ctx, id)
		if gerr == nil && rec.EndReason != "" {
			return endedMessage(rec)
		}
		select {
		case <-ctx.Done():
			return "lost the process: the sandbox's agent went away (was the sandbox terminated or killed, e.g. out of memory?): " + s.red.String(err.Error())
		case <-tick.C:
		}
	}
}

// endedMessage says how a sandbox ended, for a process lost with it.
func endedMessage(rec *sandbox.Sandbox) string {
	msg := "lost the process: the sandbox ended (" + rec.EndReason + ")"
	if rec.Error != "" {
		msg += ": " + rec.Error
	}
	return msg
}
