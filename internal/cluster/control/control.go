// Package control is `corral serve --control`: a stateless control plane
// over the cluster database. It serves the public API: a create is placed
// on a node by free resources, runtime and labels (store.Reserve) and
// forwarded to it; every other call on a sandbox is proxied, streams
// included, to the node that runs it, with the node's credential
// (nodeauth) instead of the caller's token; a list merges the nodes'.
// Any number of instances can serve at once: what they share is in the
// database. One of them at a time (an advisory lock) marks silent nodes
// lost.
//
// It imports the cluster store, nodeauth, nodetls, errdefs, reqid, the sandbox
// contract (defaults) and the wire types; never the manager.
package control

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/nodetls"
	"corral/internal/cluster/store"
	"corral/internal/readyfile"
	"corral/internal/reqid"
	"corral/internal/sandbox"
)

// Config is what `corral serve --control` is started with.
type Config struct {
	Listen string
	// EnvdListen is the address of the envd face (EnvdHandler); "" turns
	// it off.
	EnvdListen string
	// E2BRuntime is the runtime E2B creates are placed for ("": gvisor);
	// the nodes' --e2b-runtime must be the same, as it is what they
	// create.
	E2BRuntime    string
	DB            string
	TokenFile     string // the API token callers present
	JoinTokenFile string // the cluster's join token (nodeauth)
	// LostAfter is how long a node may be silent before it is marked
	// lost (default 30 s).
	LostAfter time.Duration
	// MCPMaxTimeout bounds the lifetime of a sandbox created through
	// /mcp (mcp.DefaultMaxTimeout when zero).
	MCPMaxTimeout time.Duration
	// ClusterCA is a file of the operator's CAs: nodes' certificates are
	// checked against them and the node's host instead of their pins.
	ClusterCA string
	roots     *x509.CertPool // ClusterCA's, read by Run
	Version   string
	Log       *slog.Logger
	// ReadyFile, when set, is written once the control plane serves: its
	// bound addresses (listen, envd_listen) and pid as JSON.
	ReadyFile string
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.LostAfter <= 0 {
		cfg.LostAfter = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.Log = slog.New(reqid.NewHandler(cfg.Log.Handler()))
	if cfg.E2BRuntime != "" && !slices.Contains(sandbox.Runtimes, cfg.E2BRuntime) {
		return fmt.Errorf("--e2b-runtime %q: want one of %v", cfg.E2BRuntime, sandbox.Runtimes)
	}
	token, err := readToken(cfg.TokenFile)
	if err != nil {
		return err
	}
	join, err := nodeauth.ReadJoinToken(cfg.JoinTokenFile)
	if err != nil {
		return err
	}
	if cfg.ClusterCA != "" {
		if cfg.roots, err = nodetls.LoadCA(cfg.ClusterCA); err != nil {
			return err
		}
	}
	st, err := store.Open(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	s := newServer(st, token, join, cfg)
	var eln net.Listener
	if cfg.EnvdListen != "" {
		if eln, err = net.Listen("tcp", cfg.EnvdListen); err != nil {
			ln.Close()
			return fmt.Errorf("listening on %s (--envd-listen): %w", cfg.EnvdListen, err)
		}
	}
	lctx, stopLeader := context.WithCancel(ctx)
	leaderDone := make(chan struct{})
	go func() { defer close(leaderDone); s.lead(lctx) }()
	defer func() { stopLeader(); <-leaderDone }()
	srv := &http.Server{Handler: reqid.Middleware(s, cfg.Log), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	srvs, lns := []*http.Server{srv}, []net.Listener{ln}
	if eln != nil {
		esrv := &http.Server{Handler: reqid.Middleware(s.EnvdHandler(), cfg.Log), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
		srvs, lns = append(srvs, esrv), append(lns, eln)
		cfg.Log.Info("corral control plane envd face serving", "listen", eln.Addr().String())
	}
	errc := make(chan error, len(srvs))
	for i, srv := range srvs {
		go func() { errc <- srv.Serve(lns[i]) }()
	}
	cfg.Log.Info("corral control plane serving", "listen", ln.Addr().String(), "version", cfg.Version)
	if err = writeReady(cfg.ReadyFile, ln, eln); err != nil {
		for _, srv := range srvs {
			srv.Close()
		}
		return err
	}
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range srvs {
		if serr := srv.Shutdown(sctx); serr != nil {
			srv.Close()
		}
	}
	return err
}

// writeReady writes the bound addresses to path ("": nothing).
func writeReady(path string, ln, eln net.Listener) error {
	if path == "" {
		return nil
	}
	r := struct {
		Listen     string `json:"listen"`
		EnvdListen string `json:"envd_listen,omitempty"`
		PID        int    `json:"pid"`
	}{Listen: ln.Addr().String(), PID: os.Getpid()}
	if eln != nil {
		r.EnvdListen = eln.Addr().String()
	}
	return readyfile.Write(path, r)
}

func readToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("--control needs --token-file (the API token callers present)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the API token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", fmt.Errorf("the API token in %s is %d bytes; it must be at least 16", path, len(tok))
	}
	return tok, nil
}

// lead tries for the leader lock every tick and, while it holds it, marks
// silent nodes lost and moves draining nodes' paused sandboxes.
func (s *Server) lead(ctx context.Context) {
	every := max(s.cfg.LostAfter/4, 250*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	var l *store.Leadership
	defer func() {
		if l != nil {
			l.Resign(context.Background())
		}
		s.drains.running.Wait() // moves stopping undo what they did
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l != nil && l.Check(ctx) != nil {
			l.Resign(ctx)
			l = nil
		}
		if l == nil {
			var err error
			if l, err = s.st.Lead(ctx); err != nil {
				s.log.Warn("leader election failed", "op", "cluster", "err", err)
				continue
			}
			if l == nil {
				continue
			}
			s.log.Info("this control plane instance leads", "op", "cluster")
		}
		lost, err := s.st.MarkLost(ctx, s.cfg.LostAfter)
		if err != nil {
			s.log.Warn("marking silent nodes lost", "op", "cluster", "err", err)
		}
		for _, id := range lost {
			s.log.Warn("node lost: silent for longer than the bound; its sandboxes are lost", "op", "cluster", "node", id, "lost_after", s.cfg.LostAfter)
		}
		s.drainTick(ctx)
	}
}
