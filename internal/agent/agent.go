// Package agent is the guest agent: PID 1 inside every sandbox, whatever the
// runtime. It serves the host<->agent protocol of package agentapi (see
// docs/AGENT_PROTOCOL.md) over one byte stream: it starts and supervises
// processes, streams their output, reaps zombies, reads and writes files
// and watches directories (inotify), every path resolved inside its root
// by package fspath.
//
// Everything the daemon sends is bounded (frame, header and body sizes,
// concurrent streams, output backlogs, process counts) and every path is
// treated as hostile: the agent shares the sandbox with untrusted code.
//
// It imports nothing from the daemon: only agentapi, fspath, errdefs,
// dirtar, the standard library, golang.org/x, creack/pty and
// vishvananda/netlink (a copy of a vm snapshot moves its own address).
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"corral/internal/agentapi"
)

// Config configures a Server.
type Config struct {
	// Root is the directory every file path and /etc/passwd are resolved
	// in: "/" in production, a temporary directory in tests.
	Root string
	// Listen is the address Main listens on: "unix:/path/to/sock".
	Listen string
	// Logger receives the agent's own logs; nil discards them.
	Logger *slog.Logger
	// UpperDir is the root file system's overlayfs upper directory, when
	// the agent can see it (a vm guest: vminit passes --upper); empty
	// makes GET /v1/fs/export-upper not_supported.
	UpperDir string
	// Console receives the output of processes started with Log: the
	// sandbox console (os.Stdout in production); nil discards it.
	Console io.Writer
	// OnSessionEnd runs after POST /v1/session/end has closed the
	// connection (Main: release a listener a snapshot cannot hold).
	OnSessionEnd func()
	// Protocols are the protocol versions served (a subset of
	// agentapi.SupportedVersions); empty serves them all. Tests serve
	// older ones to stand for an agent frozen in an old image or snapshot.
	Protocols []int
}

// Bounds of the HTTP/2 transport (docs/AGENT_PROTOCOL.md, "Transport").
//
// A request body (stdin, a file) gets a receive window of its own, and the
// connection's window is the sum of all of them: a stdin stream into a
// process that does not read can fill its own window but never the
// connection's, so it cannot hold up any other call.
const (
	maxFrameSize         = 256 << 10
	maxHeaderBytes       = 64 << 10
	maxConcurrentStreams = 1000
	streamRecvWindow     = 1 << 20
	connRecvWindow       = streamRecvWindow * maxConcurrentStreams
)

// Server serves the agent protocol. One Server holds the sandbox's process
// table; any number of connections, over time or at once, share it.
type Server struct {
	root    string
	upper   string
	log     *slog.Logger
	console io.Writer
	onEnd   func()
	procs   *table
	reaper  *reaper
	started time.Time
	// protocols are the versions served; watches holds a token per
	// watch stream open (agentapi.MaxWatches).
	protocols []int
	watches   chan struct{}
	// nfs are the loopback listeners of volumes mounted over NFS.
	nfs nfsRelays
	// http serves each connection ServeConn is given (Serve on a
	// connListener): HTTP/2 with prior knowledge only.
	http *http.Server
}

// New returns a Server. It starts the process-wide child reaper, which waits
// for every child of this process from then on.
func New(cfg Config) *Server {
	root := cfg.Root
	if root == "" {
		root = "/"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	console := cfg.Console
	if console == nil {
		console = io.Discard
	}
	s := &Server{
		root:    filepath.Clean(root),
		upper:   cfg.UpperDir,
		log:     log,
		console: &lockedWriter{w: console},
		onEnd:   cfg.OnSessionEnd,
		procs:   newTable(),
		reaper:  startReaper(),
		started: time.Now(),
		watches: make(chan struct{}, agentapi.MaxWatches),
	}
	s.protocols = agentapi.SupportedVersions
	if len(cfg.Protocols) > 0 {
		s.protocols = cfg.Protocols
	}
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	s.http = &http.Server{
		Handler:        s.routes(),
		Protocols:      &h2c,
		MaxHeaderBytes: maxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxReadFrameSize:              maxFrameSize,
			MaxConcurrentStreams:          maxConcurrentStreams,
			MaxReceiveBufferPerStream:     streamRecvWindow,
			MaxReceiveBufferPerConnection: connRecvWindow,
		},
		BaseContext: func(l net.Listener) context.Context { return l.(*connListener).ctx },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s
}

// routes maps every path of every protocol version this agent serves.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+agentapi.PathVersion, s.wrap(s.version))
	for _, v := range s.protocols {
		p := fmt.Sprintf("/v%d", v)
		if v >= agentapi.WatchSince {
			mux.Handle("GET "+p+agentapi.PathWatch, s.wrap(s.fsWatch))
		}
		if v >= agentapi.VolumeNFSSince {
			mux.Handle("POST "+p+agentapi.PathVolumeMount, s.wrap(s.volumeMount))
			mux.Handle("POST "+p+agentapi.PathVolumeRelay, s.wrap(s.volumeRelay))
		}
		mux.Handle("GET "+p+agentapi.PathHealth, s.wrap(s.health))
		mux.Handle("POST "+p+agentapi.PathStart, s.wrap(s.processStart))
		mux.Handle("POST "+p+agentapi.PathConnect, s.wrap(s.processConnect))
		mux.Handle("GET "+p+agentapi.PathList, s.wrap(s.processList))
		mux.Handle("POST "+p+agentapi.PathStdin, s.wrap(s.processStdin))
		mux.Handle("POST "+p+agentapi.PathCloseStdin, s.wrap(s.processCloseStdin))
		mux.Handle("POST "+p+agentapi.PathSignal, s.wrap(s.processSignal))
		mux.Handle("POST "+p+agentapi.PathResize, s.wrap(s.processResize))
		mux.Handle("GET "+p+agentapi.PathFiles, s.wrap(s.fsRead))
		mux.Handle("PUT "+p+agentapi.PathFiles, s.wrap(s.fsWrite))
		mux.Handle("GET "+p+agentapi.PathStat, s.wrap(s.fsStat))
		mux.Handle("GET "+p+agentapi.PathListDir, s.wrap(s.fsList))
		mux.Handle("POST "+p+agentapi.PathMakeDir, s.wrap(s.fsMkdir))
		mux.Handle("POST "+p+agentapi.PathRemove, s.wrap(s.fsRemove))
		mux.Handle("POST "+p+agentapi.PathRename, s.wrap(s.fsRename))
		mux.Handle("POST "+p+agentapi.PathChmod, s.wrap(s.fsChmod))
		mux.Handle("POST "+p+agentapi.PathPortConnect, s.wrap(s.portConnect))
		mux.Handle("GET "+p+agentapi.PathExportUpper, s.wrap(s.exportUpper))
		mux.Handle("POST "+p+agentapi.PathEndSession, s.wrap(s.endSession))
		mux.Handle("POST "+p+agentapi.PathIdentity, s.wrap(s.identity))
	}
	mux.Handle("/", s.wrap(notFound))
	return mux
}

// ServeConn serves one HTTP/2 connection until it closes or ctx ends.
func (s *Server) ServeConn(ctx context.Context, conn net.Conn) {
	ctx, end := context.WithCancel(ctx)
	defer end()
	ctx = context.WithValue(ctx, endSessionKey{}, end)
	l := newConnListener(ctx, conn)
	stop := context.AfterFunc(ctx, func() { l.conn.Close() })
	defer stop()
	defer l.conn.Close()
	s.log.Debug("connection opened", "op", "serve")
	if err := s.http.Serve(l); !errors.Is(err, net.ErrClosed) {
		s.log.Warn("serving a connection failed", "op", "serve", "err", err)
	}
	s.log.Debug("connection closed", "op", "serve")
}

// connListener hands http.Server.Serve the one connection ServeConn was
// given, then blocks until that connection is closed, so that Serve
// returns when its only connection is done. ctx is the connection's base
// context (with its endSessionKey).
type connListener struct {
	ctx    context.Context
	conn   *closeNotifyConn
	handed sync.Once
}

func newConnListener(ctx context.Context, conn net.Conn) *connListener {
	return &connListener{ctx: ctx, conn: &closeNotifyConn{Conn: conn, closed: make(chan struct{})}}
}

// Accept returns the connection the first time, then net.ErrClosed once
// the connection is closed.
func (l *connListener) Accept() (net.Conn, error) {
	var first bool
	l.handed.Do(func() { first = true })
	if first {
		return l.conn, nil
	}
	<-l.conn.closed
	return nil, net.ErrClosed
}

// Close does nothing: the connection is ServeConn's to close.
func (l *connListener) Close() error { return nil }

// Addr is the connection's local address.
func (l *connListener) Addr() net.Addr { return l.conn.LocalAddr() }

// closeNotifyConn closes closed when it is first closed.
type closeNotifyConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

// Close closes the connection and notes that it is closed.
func (c *closeNotifyConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// Serve accepts connections on l until ctx ends (then it returns nil) or
// accepting fails for good. The daemon reconnects after its own restart, so
// a closed connection is routine. Serve closes l.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	backoff := 5 * time.Millisecond
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !temporary(err) {
				return fmt.Errorf("accepting connections: %w", err)
			}
			s.log.Warn("accept failed; retrying", "op", "serve", "err", err)
			if !sleepCtx(ctx, backoff) {
				return nil
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.ServeConn(ctx, conn)
		}()
	}
}

// temporary reports accept errors worth retrying (out of descriptors, a
// client that went away during the handshake).
func temporary(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EINTR)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// lockedWriter serialises writes to the console from many processes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes p whole, excluding other writers.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
