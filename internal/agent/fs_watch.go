package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/fspath"
)

// fsWatch is GET /v2/fs/watch?path=P[&recursive=1][&user=U]: an NDJSON
// stream of the changes in directory P (and, recursive, below it), until
// the caller goes away or P does.
func (s *Server) fsWatch(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	recursive := false
	switch v := q.Get("recursive"); v {
	case "", "0", "false":
	case "1", "true":
		recursive = true
	default:
		return errdefs.Invalid("recursive", "true or false, got %q", v)
	}
	sandbox, host, err := s.hostPath(q.Get("path"), q.Get("user"), true)
	if err != nil {
		return err
	}
	fi, err := os.Stat(host)
	if err != nil {
		return fsError("watching", sandbox, err)
	}
	if !fi.IsDir() {
		return errdefs.Invalid("path", "%s is not a directory", sandbox)
	}
	// The slot is given back to the channel it was taken from.
	slots := s.watches
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	default:
		return fmt.Errorf("%w: %d watches are open already", errdefs.ErrResourceExhausted, agentapi.MaxWatches)
	}
	wt, err := newWatcher(s.root, host, recursive, agentapi.MaxWatchQueue)
	if err != nil {
		return err
	}
	defer wt.close()
	w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
	w.WriteHeader(http.StatusOK)
	ww := &watchWriter{w: w, rc: http.NewResponseController(w), wt: wt}
	if ww.write(agentapi.WatchEvent{Type: agentapi.WatchStart, Path: fspath.Rel(s.root, host), Dir: true}) != nil {
		return nil
	}
	ww.run(r)
	return nil
}

// watchWriter writes a watch's events as NDJSON, flushing after each
// batch, with an overflow report wherever events were dropped.
type watchWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	wt *watcher
}

// run streams until the caller goes away, writing fails, or the watch
// ends (then an end event says why).
func (ww *watchWriter) run(r *http.Request) {
	keepalive := time.NewTimer(agentapi.KeepaliveInterval)
	defer keepalive.Stop()
	for {
		var batch []agentapi.WatchEvent
		select {
		case ev := <-ww.wt.queue:
			batch = ww.drain(append(batch, ev))
		case <-ww.wt.lost:
			batch = ww.drain(batch)
		case <-ww.wt.done:
			batch = append(ww.drain(batch), agentapi.WatchEvent{Type: agentapi.WatchEnd, Error: ww.wt.endErr})
			_ = ww.write(batch...)
			return
		case <-keepalive.C:
			batch = append(batch, agentapi.WatchEvent{Type: agentapi.EventKeepalive})
		case <-r.Context().Done():
			return
		}
		if ww.write(batch...) != nil {
			return
		}
		keepalive.Reset(agentapi.KeepaliveInterval)
	}
}

// drain adds what is queued now (at most a queue's worth) to batch, then
// the report of events dropped so far.
func (ww *watchWriter) drain(batch []agentapi.WatchEvent) []agentapi.WatchEvent {
queued:
	for range agentapi.MaxWatchQueue {
		select {
		case ev := <-ww.wt.queue:
			batch = append(batch, ev)
		default:
			break queued
		}
	}
	if n := ww.wt.dropped.Swap(0); n > 0 {
		batch = append(batch, agentapi.WatchEvent{Type: agentapi.WatchOverflow, Dropped: int(n),
			Error: fmt.Sprintf("%d events dropped: the reader fell behind", n)})
	}
	return batch
}

func (ww *watchWriter) write(events ...agentapi.WatchEvent) error {
	for _, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if _, err := ww.w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return ww.rc.Flush()
}
