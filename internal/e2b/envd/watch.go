package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"corral/internal/agentapi"
	"corral/internal/e2b/envd/gen/filesystem"
)

// Bounds of the polled watchers (CreateWatcher): how many the daemon keeps
// at once, and the events one holds between two GetWatcherEvents.
const (
	maxWatchers        = 1024
	maxSandboxWatchers = 32
	maxWatcherEvents   = agentapi.MaxWatchQueue
)

func errAlreadyExists(p string) error { return fmt.Errorf("directory %s already exists", p) }

// WatchDir streams a directory's changes until the client goes away or
// the directory or the sandbox does.
func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	id, user, err := call(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return err
	}
	ws, err := f.s.files().Watch(ctx, id, req.Msg.GetPath(), req.Msg.GetRecursive(), user)
	if err != nil {
		return f.s.connectErr(err)
	}
	defer ws.Close()
	if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	keep := &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}
	var uploads uploadFold
	for {
		ev, err := ws.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return connect.NewError(connect.CodeUnavailable, errors.New("the watch ended: the sandbox's agent went away (the sandbox ended or was paused)"))
		}
		switch ev.Type {
		case agentapi.WatchEnd:
			return connect.NewError(connect.CodeNotFound, fmt.Errorf("the watch ended: %s", f.s.red.String(ev.Error)))
		case agentapi.EventKeepalive:
			if err := stream.Send(keep); err != nil {
				return err
			}
			continue
		}
		for _, ev := range uploads.fold(ev) {
			fe := f.s.fsEvent(ctx, id, user, ev, req.Msg.GetIncludeEntry())
			if fe == nil {
				continue
			}
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
				return err
			}
		}
	}
}

// uploadTempPrefix names the temporary file the agent writes an upload
// into before renaming it over its target (internal/agent/fs_write.go):
// envd writes in place, so its watchers never see such a file, and the
// face hides it too (the upload shows as the target's create).
const uploadTempPrefix = ".corral-upload-"

// fsEvent translates a change event; nil for one envd has no type for.
func (s *Server) fsEvent(ctx context.Context, id, user string, ev agentapi.WatchEvent, withEntry bool) *filesystem.FilesystemEvent {
	var t filesystem.EventType
	switch ev.Type {
	case agentapi.WatchCreate:
		t = filesystem.EventType_EVENT_TYPE_CREATE
	case agentapi.WatchWrite:
		t = filesystem.EventType_EVENT_TYPE_WRITE
	case agentapi.WatchRemove:
		t = filesystem.EventType_EVENT_TYPE_REMOVE
	case agentapi.WatchRename:
		t = filesystem.EventType_EVENT_TYPE_RENAME
	case agentapi.WatchChmod:
		t = filesystem.EventType_EVENT_TYPE_CHMOD
	default:
		return nil
	}
	if strings.HasPrefix(path.Base(ev.Name), uploadTempPrefix) {
		return nil
	}
	out := &filesystem.FilesystemEvent{Name: ev.Name, Type: t}
	if withEntry && t != filesystem.EventType_EVENT_TYPE_REMOVE && t != filesystem.EventType_EVENT_TYPE_RENAME {
		if e, err := s.files().Stat(ctx, id, ev.Path, user); err == nil {
			out.Entry = entryInfo(e)
		}
	}
	return out
}

// watcher is one polled watch: its stream read into a bounded queue.
type watcher struct {
	sandbox string
	cancel  context.CancelFunc
	mu      sync.Mutex
	events  []*filesystem.FilesystemEvent
	ended   error // why the stream ended, once it has
	endedAt time.Time
}

// watchers are the daemon's polled watchers by id.
type watchers struct {
	mu sync.Mutex
	m  map[string]*watcher
}

func newWatchers() *watchers { return &watchers{m: map[string]*watcher{}} }

// CreateWatcher starts a watch whose events GetWatcherEvents collects. It
// lives until RemoveWatcher, or until its sandbox or directory goes.
func (f *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	id, user, err := call(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	ws := f.s.watchers
	ws.prune(time.Now())
	if err := ws.room(id); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := f.s.files().Watch(wctx, id, req.Msg.GetPath(), req.Msg.GetRecursive(), user)
	if err != nil {
		cancel()
		return nil, f.s.connectErr(err)
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	wid := hex.EncodeToString(b)
	w := &watcher{sandbox: id, cancel: cancel}
	ws.mu.Lock()
	ws.m[wid] = w
	ws.mu.Unlock()
	go f.s.collect(wctx, w, stream, id, user, req.Msg.GetIncludeEntry())
	return connect.NewResponse(&filesystem.CreateWatcherResponse{WatcherId: wid}), nil
}

// collect reads a watcher's stream into its queue until the stream ends.
func (s *Server) collect(ctx context.Context, w *watcher, stream *agentapi.WatchStream, id, user string, withEntry bool) {
	defer stream.Close()
	var uploads uploadFold
	for {
		ev, err := stream.Recv()
		switch {
		case err != nil:
			w.end(errors.New("the watch ended: the sandbox's agent went away (the sandbox ended or was paused)"))
			return
		case ev.Type == agentapi.WatchEnd:
			w.end(fmt.Errorf("the watch ended: %s", s.red.String(ev.Error)))
			return
		}
		for _, ev := range uploads.fold(ev) {
			fe := s.fsEvent(ctx, id, user, ev, withEntry)
			if fe == nil {
				continue
			}
			w.mu.Lock()
			if len(w.events) < maxWatcherEvents {
				w.events = append(w.events, fe)
			}
			w.mu.Unlock()
		}
	}
}

func (w *watcher) end(err error) {
	w.mu.Lock()
	w.ended, w.endedAt = err, time.Now()
	w.mu.Unlock()
}

// room refuses a watcher past the daemon's bound or past a sandbox's
// share of it (so one sandbox's client cannot take them all).
func (ws *watchers) room(sandbox string) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	mine := 0
	for _, w := range ws.m {
		if w.sandbox == sandbox {
			mine++
		}
	}
	if len(ws.m) >= maxWatchers || mine >= maxSandboxWatchers {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("too many watchers: %d open for this sandbox (at most %d), %d in all (at most %d)",
			mine, maxSandboxWatchers, len(ws.m), maxWatchers))
	}
	return nil
}

// get is the watcher id of sandbox, or NotFound.
func (ws *watchers) get(sandbox, id string) (*watcher, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.m[id]
	if !ok || w.sandbox != sandbox {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found", id))
	}
	return w, nil
}

// GetWatcherEvents returns and clears the events collected since the last
// call; a watcher whose stream ended answers its remaining events once,
// then NotFound with the reason, and is gone.
func (f *filesystemService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	wid := req.Msg.GetWatcherId()
	w, err := f.s.watchers.get(sandboxID(req.Header()), wid)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	events, ended := w.events, w.ended
	w.events = nil
	w.mu.Unlock()
	if len(events) == 0 && ended != nil {
		f.s.watchers.remove(wid)
		return nil, connect.NewError(connect.CodeNotFound, ended)
	}
	return connect.NewResponse(&filesystem.GetWatcherEventsResponse{Events: events}), nil
}

// RemoveWatcher ends a watcher.
func (f *filesystemService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	wid := req.Msg.GetWatcherId()
	if _, err := f.s.watchers.get(sandboxID(req.Header()), wid); err != nil {
		return nil, err
	}
	f.s.watchers.remove(wid)
	return connect.NewResponse(&filesystem.RemoveWatcherResponse{}), nil
}

func (ws *watchers) remove(id string) {
	ws.mu.Lock()
	w := ws.m[id]
	delete(ws.m, id)
	ws.mu.Unlock()
	if w != nil {
		w.cancel()
	}
}

// prune drops watchers whose stream ended over a minute ago (a client
// that went away without RemoveWatcher).
func (ws *watchers) prune(now time.Time) {
	ws.mu.Lock()
	var gone []string
	for id, w := range ws.m {
		w.mu.Lock()
		if w.ended != nil && now.Sub(w.endedAt) > time.Minute {
			gone = append(gone, id)
		}
		w.mu.Unlock()
	}
	ws.mu.Unlock()
	for _, id := range gone {
		ws.remove(id)
	}
}
