package envd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"corral/internal/agentapi"
	"corral/internal/e2b/envd/gen/process"
	"corral/internal/manager"
)

// keepaliveHeader is how often (seconds) the e2b SDK asks a stream for a
// keepalive event while nothing else is sent.
const keepaliveHeader = "Keepalive-Ping-Interval"

// keepalive is the interval a request asks for, bounded to 1s..1h; 0 when
// it asks for none (the agent's own keepalives still pass through).
func keepalive(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get(keepaliveHeader))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// procEvent is one Recv result of a process stream.
type procEvent struct {
	ev  agentapi.Event
	err error
}

// pump relays a process's events to send until the end event, the
// client's going away, or the stream's break (the sandbox ended: the
// connection is cut, which the SDK reads as the sandbox being gone). One
// goroutine reads the agent; this one alone writes the response.
func (s *Server) pump(ctx context.Context, proc *manager.Process, every time.Duration, send func(*process.ProcessEvent) error) error {
	events := make(chan procEvent)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			ev, err := proc.Recv()
			select {
			case events <- procEvent{ev, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if err := send(keepaliveEvent()); err != nil {
				return err
			}
		case pe := <-events:
			if pe.err != nil {
				if errors.Is(pe.err, io.EOF) {
					return nil
				}
				// The sandbox's agent went away (the sandbox was killed or
				// ended): cut the connection, as envd's own end does when
				// its VM goes. The SDK reads a cut stream as such, asks
				// /health (502 now) and says the sandbox was killed.
				panic(http.ErrAbortHandler)
			}
			out := toProcessEvent(pe.ev)
			if out == nil {
				continue
			}
			if err := send(out); err != nil {
				return err
			}
			if pe.ev.Type == agentapi.EventEnd {
				return nil
			}
		}
	}
}

func keepaliveEvent() *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}
}

// toProcessEvent translates an agent event; nil for none it knows.
func toProcessEvent(ev agentapi.Event) *process.ProcessEvent {
	data := func(d *process.ProcessEvent_DataEvent) *process.ProcessEvent {
		return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: d}}
	}
	switch ev.Type {
	case agentapi.EventStart:
		return &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: uint32(ev.PID)}}}
	case agentapi.EventStdout:
		return data(&process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: ev.Data}})
	case agentapi.EventStderr:
		return data(&process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: ev.Data}})
	case agentapi.EventPTY:
		return data(&process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Pty{Pty: ev.Data}})
	case agentapi.EventKeepalive:
		return keepaliveEvent()
	case agentapi.EventEnd:
		return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: endEvent(ev)}}
	}
	return nil
}

// endEvent is envd's end event: exited is false for a process a signal
// ended, and status reads as Go's os.ProcessState does ("exit status 1",
// "signal: killed").
func endEvent(ev agentapi.Event) *process.ProcessEvent_EndEvent {
	end := &process.ProcessEvent_EndEvent{ExitCode: int32(ev.ExitCode), Exited: ev.Signal == "", Status: fmt.Sprintf("exit status %d", ev.ExitCode)}
	if ev.Signal != "" {
		end.Status = "signal: " + ev.Signal
	}
	if ev.TimedOut {
		end.Status = "timed out"
	}
	if ev.Error != "" {
		msg := ev.Error
		end.Error = &msg
	}
	return end
}
