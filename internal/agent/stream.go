package agent

import (
	"encoding/json"
	"net/http"
	"time"

	"corral/internal/agentapi"
)

// streamEvents attaches to p and writes its NDJSON event stream until the
// end event, or until the caller goes away (the process keeps running).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, p *process) {
	sub, backlog, err := p.out.subscribe()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer p.out.unsubscribe(sub)
	w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
	w.WriteHeader(http.StatusOK)
	ew := &eventWriter{w: w, rc: http.NewResponseController(w)}
	events := append([]agentapi.Event{{Type: agentapi.EventStart, PID: p.pid()}}, backlog...)
	if ew.write(events...) != nil {
		return
	}
	keepalive := time.NewTimer(agentapi.KeepaliveInterval)
	defer keepalive.Stop()
	for {
		var err error
		select {
		case ev, ok := <-sub.ch:
			if !ok {
				<-p.done
				_ = ew.write(p.end)
				return
			}
			err = ew.write(ev)
		case <-keepalive.C:
			err = ew.write(agentapi.Event{Type: agentapi.EventKeepalive})
		case <-r.Context().Done():
			return
		}
		if err != nil {
			s.log.Debug("stream detached", "op", "process", "pid", p.pid(), "err", err)
			return
		}
		keepalive.Reset(agentapi.KeepaliveInterval)
	}
}

// eventWriter writes NDJSON lines and flushes after each batch.
type eventWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (e *eventWriter) write(events ...agentapi.Event) error {
	for _, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if _, err := e.w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return e.rc.Flush()
}
