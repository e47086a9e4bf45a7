package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/fspath"
)

// watchMask is what every watched directory reports: changes of its
// entries, and its own removal or move (for the watched directory itself).
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// watcher follows one directory (recursive: and every directory below it,
// including ones that appear later) with one inotify instance, and turns
// the kernel's events into agentapi.WatchEvents in a bounded queue. A
// queue that is full drops events and counts them (dropped, signalled on
// lost), so a reader that falls behind costs a report, never memory.
//
// Only the reading goroutine touches dirs and paths once it runs.
type watcher struct {
	root, base string // the agent's root (event paths are relative to it); the watched directory
	recursive  bool
	fd         int
	file       *os.File // fd in Go's poller: Close interrupts a blocked Read

	dirs  map[int32]string // watch descriptor → host directory
	paths map[string]int32

	queue   chan agentapi.WatchEvent
	dropped atomic.Int64
	lost    chan struct{} // cap 1: events were dropped
	done    chan struct{} // closed when reading ends
	endErr  string        // why the watch ended on its own; set before done closes
}

// newWatcher sets up watches on base (a directory's host path inside root)
// and, when recursive, on every directory below it, then starts reading
// into a queue of queueLen events.
func newWatcher(root, base string, recursive bool, queueLen int) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, watchError("starting a watch", err)
	}
	w := &watcher{root: root, base: base, recursive: recursive, fd: fd, file: os.NewFile(uintptr(fd), "inotify"),
		dirs: map[int32]string{}, paths: map[string]int32{}, queue: make(chan agentapi.WatchEvent, queueLen),
		lost: make(chan struct{}, 1), done: make(chan struct{})}
	if err := w.add(base); err != nil {
		w.file.Close()
		return nil, err
	}
	if recursive {
		if err := w.addTree(base, false); err != nil {
			w.file.Close()
			return nil, err
		}
	}
	go w.read()
	return w, nil
}

// close stops the watch and waits for its reader.
func (w *watcher) close() {
	w.file.Close()
	<-w.done
}

// watchError maps an inotify failure to an error kind.
func watchError(what string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return fmt.Errorf("%w: %s: the sandbox's inotify limits are reached: %v", errdefs.ErrResourceExhausted, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// add watches dir.
func (w *watcher) add(dir string) error {
	if len(w.dirs) >= agentapi.MaxWatchDirs {
		return fmt.Errorf("%w: more than %d directories to watch", errdefs.ErrResourceExhausted, agentapi.MaxWatchDirs)
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		return watchError("watching "+fspath.Rel(w.root, dir), err)
	}
	w.dirs[int32(wd)] = dir
	w.paths[dir] = int32(wd)
	return nil
}

// addTree watches every directory below dir (not dir itself), reading
// directories in batches; with report, every entry found is reported as
// created (they appeared before their directory was watched). A
// directory that vanishes meanwhile is skipped.
func (w *watcher) addTree(dir string, report bool) error {
	stack := []string{dir}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		f, err := os.Open(d)
		if err != nil {
			continue
		}
		for {
			ents, err := f.ReadDir(256)
			for _, e := range ents {
				p := filepath.Join(d, e.Name())
				if report {
					w.emit(agentapi.WatchCreate, p, e.IsDir())
				}
				if !e.IsDir() {
					continue
				}
				if err := w.add(p); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
					f.Close()
					return err
				}
				stack = append(stack, p)
			}
			if err != nil {
				break
			}
		}
		f.Close()
	}
	return nil
}

// read turns the kernel's events into queued ones until the watch is
// closed or ends.
func (w *watcher) read() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) {
				w.endErr = "reading the kernel's events: " + err.Error()
			}
			return
		}
		if w.parse(buf[:n]) {
			return
		}
	}
}

// parse handles the events in b; true once the watch has ended.
func (w *watcher) parse(b []byte) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:4]))
		mask := binary.NativeEndian.Uint32(b[4:8])
		n := int(binary.NativeEndian.Uint32(b[12:16]))
		if unix.SizeofInotifyEvent+n > len(b) {
			return false
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+n]), "\x00")
		b = b[unix.SizeofInotifyEvent+n:]
		if w.handle(wd, mask, name) {
			return true
		}
	}
	return false
}

// handle acts on one kernel event; true once the watch has ended.
func (w *watcher) handle(wd int32, mask uint32, name string) bool {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.push(agentapi.WatchEvent{Type: agentapi.WatchOverflow, Error: "the kernel's event queue overflowed"})
		return false
	}
	dir, ok := w.dirs[wd]
	if !ok {
		return false // a watch already forgotten
	}
	if name == "" {
		return w.handleSelf(wd, dir, mask)
	}
	host, isDir := filepath.Join(dir, name), mask&unix.IN_ISDIR != 0
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		w.emit(agentapi.WatchCreate, host, isDir)
		if isDir && w.recursive {
			w.follow(host)
		}
	case mask&unix.IN_MOVED_FROM != 0:
		w.emit(agentapi.WatchRename, host, isDir)
		if isDir && w.recursive {
			w.forgetTree(host)
		}
	case mask&unix.IN_DELETE != 0:
		w.emit(agentapi.WatchRemove, host, isDir)
	case mask&unix.IN_MODIFY != 0:
		w.emit(agentapi.WatchWrite, host, isDir)
	case mask&unix.IN_ATTRIB != 0:
		w.emit(agentapi.WatchChmod, host, isDir)
	}
	return false
}

// handleSelf acts on an event about a watched directory itself: only the
// watched directory's own matter (a subdirectory's are reported by its
// parent, with its name); true once the watch has ended.
func (w *watcher) handleSelf(wd int32, dir string, mask uint32) bool {
	if mask&unix.IN_IGNORED != 0 {
		delete(w.dirs, wd)
		if w.paths[dir] == wd {
			delete(w.paths, dir)
		}
	}
	if dir != w.base {
		return false
	}
	switch {
	case mask&unix.IN_ATTRIB != 0:
		w.emit(agentapi.WatchChmod, dir, true)
	case mask&(unix.IN_DELETE_SELF|unix.IN_IGNORED) != 0:
		w.endErr = "the watched directory was removed"
		return true
	case mask&unix.IN_MOVE_SELF != 0:
		w.endErr = "the watched directory was moved"
		return true
	case mask&unix.IN_UNMOUNT != 0:
		w.endErr = "the watched directory's filesystem was unmounted"
		return true
	}
	return false
}

// follow watches a directory that appeared in a recursive watch, and what
// is already in it.
func (w *watcher) follow(dir string) {
	if _, ok := w.paths[dir]; ok {
		return
	}
	err := w.add(dir)
	if err == nil {
		err = w.addTree(dir, true)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		w.push(agentapi.WatchEvent{Type: agentapi.WatchOverflow, Path: fspath.Rel(w.root, dir),
			Error: "not watching all of a new directory: " + err.Error()})
	}
}

// forgetTree stops watching dir and everything below it (it moved away;
// if it moved within the watch, its new name is followed anew).
func (w *watcher) forgetTree(dir string) {
	for p, wd := range w.paths {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
			delete(w.paths, p)
			delete(w.dirs, wd)
		}
	}
}

// emit queues a change event for host.
func (w *watcher) emit(typ, host string, isDir bool) {
	name := ""
	if rel, err := filepath.Rel(w.base, host); err == nil && rel != "." {
		name = rel
	}
	w.push(agentapi.WatchEvent{Type: typ, Path: fspath.Rel(w.root, host), Name: name, Dir: isDir})
}

// push queues ev, or counts it dropped when the queue is full.
func (w *watcher) push(ev agentapi.WatchEvent) {
	select {
	case w.queue <- ev:
	default:
		w.dropped.Add(1)
		select {
		case w.lost <- struct{}{}:
		default:
		}
	}
}
