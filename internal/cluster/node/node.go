// Package node is the cluster side of `corral serve --node`: it joins the
// cluster (registers the daemon's capacity, runtimes and labels under its
// name and credential), heartbeats with the sandboxes it runs, ships its
// audit trail and usage records to the cluster database (ship.go),
// terminates those the cluster gave up on while it was lost, and lets
// control planes in with the node's credential (nodeauth) instead of the
// API token. The daemon runs sandboxes exactly as it does alone.
//
// It imports the manager, the audit trail, the cluster store, nodeauth
// and nodetls; only the daemon imports it.
package node

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/audit"
	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/manager"
	"corral/internal/sandbox"
)

// Config is a node's part of `corral serve`.
type Config struct {
	DB      string // the cluster database's URL
	Name    string // the node's id in the cluster
	Address string // the base URL control planes reach this daemon's API at
	// EnvdAddress is the base URL control planes reach its E2B envd
	// face at ("": it serves none).
	EnvdAddress string
	// E2BKeyPrefix begins the E2B API key (the prefix, then the API
	// token) a request with the node's credential is let in with.
	E2BKeyPrefix  string
	JoinTokenFile string
	Labels        map[string]string
	// Heartbeat is the time between heartbeats (default 5 s).
	Heartbeat time.Duration
	TLS       TLSConfig
	// Audit is the daemon's audit trail, shipped to the database with
	// the usage records (ship.go); nil when the trail is off.
	Audit    *audit.Trail
	StateDir string
	Log      *slog.Logger
}

// identityFile (in the state dir) keeps the node's name and nonce, so a
// restart proves itself with the same credential.
const identityFile = "cluster-node.json"

type identity struct {
	Name  string `json:"name"`
	Nonce string `json:"nonce"`
}

// Node is a joined node.
type Node struct {
	cfg    Config
	st     *store.Store
	m      *manager.Manager
	cred   string
	join   string // the join token: derives other nodes' credentials (images.go)
	nonce  string // the credential's public half (identity)
	token  string // the daemon's API token, used in process only
	images *http.ServeMux
	tls    *tls.Config  // its listeners' (tls.go)
	client *http.Client // to other nodes, over TLS
	layers *http.ServeMux
	// What reportImages last sent, and the heartbeats counted (beat's
	// goroutine only).
	reported []byte
	beats    int
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// Join registers the daemon of m (whose API token is token) and starts
// heartbeating until Close.
func Join(ctx context.Context, cfg Config, m *manager.Manager, token string) (*Node, error) {
	if cfg.Name == "" || cfg.Address == "" {
		return nil, fmt.Errorf("--node needs --node-name and --node-address")
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 5 * time.Second
	}
	join, err := nodeauth.ReadJoinToken(cfg.JoinTokenFile)
	if err != nil {
		return nil, err
	}
	id, err := loadIdentity(cfg.StateDir, cfg.Name)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, st: st, m: m, cred: nodeauth.Credential(join, cfg.Name, id.Nonce), nonce: id.Nonce, join: join, token: token}
	n.images = n.imagesMux()
	n.layers = n.layersMux()
	sec, err := newClusterSecrets(st, join)
	if err != nil {
		st.Close()
		return nil, err
	}
	fp, err := n.loadTLS()
	if err != nil {
		st.Close()
		return nil, err
	}
	m.UseSecretStore(sec) // the cluster's secrets, not this state dir's
	rec := n.record()
	rec.RuntimeVersions = n.runtimeVersions(ctx)
	if err := st.Register(ctx, rec); err != nil {
		st.Close()
		return nil, err
	}
	if err := st.SetTLSFingerprint(ctx, rec.ID, rec.CredentialHash, fp); err != nil {
		st.Close()
		return nil, err
	}
	cfg.Log.Info("joined the cluster", "op", "cluster", "node", cfg.Name, "address", cfg.Address, "tls_fingerprint", fp)
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	n.wg.Add(2)
	go n.beat(hctx)
	go n.ship(hctx, &shipper{st: st, node: cfg.Name, trail: cfg.Audit, m: m, log: cfg.Log, auditAt: -1})
	return n, nil
}

// loadIdentity reads the node's identity, or makes it on the first join.
// A state dir that joined under another name refuses to change it.
func loadIdentity(dir, name string) (identity, error) {
	path := filepath.Join(dir, identityFile)
	var id identity
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &id); err != nil {
			return identity{}, fmt.Errorf("reading %s: %w", path, err)
		}
		if id.Name != name {
			return identity{}, fmt.Errorf("this state directory joined the cluster as node %q, not %q", id.Name, name)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return identity{}, err
	}
	id = identity{Name: name, Nonce: nodeauth.NewNonce()}
	b, _ = json.Marshal(id)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return identity{}, fmt.Errorf("writing %s: %w", path, err)
	}
	return id, nil
}

// record is the node as registered and as each heartbeat reports it: the
// manager's admittable CPU and memory and bound on sandboxes, the state
// dir's free disk now.
func (n *Node) record() store.Node {
	u := n.m.Usage()
	var fs unix.Statfs_t
	var diskMB int64
	if unix.Statfs(n.cfg.StateDir, &fs) == nil {
		diskMB = int64(fs.Bavail) * fs.Bsize >> 20
	}
	_, kvmErr := os.Stat("/dev/kvm")
	// Zero is a manager with no bound on that resource.
	cpu, mem := u.AdmittableCPUMilli, u.AdmittableMemoryMB
	if cpu <= 0 {
		cpu = unbounded
	}
	if mem <= 0 {
		mem = unbounded
	}
	return store.Node{ID: n.cfg.Name, Address: n.cfg.Address, EnvdAddress: n.cfg.EnvdAddress, CPUMilli: cpu, MemoryMB: mem,
		DiskMB: diskMB, MaxSandboxes: u.MaxSandboxes, Runtimes: n.m.Runtimes(), KVM: kvmErr == nil, Labels: n.cfg.Labels,
		CredentialNonce: n.nonce, CredentialHash: nodeauth.Hash(n.cred)}
}

// runtimeVersions names the version of each runtime that takes memory
// snapshots, registered at join (a runtime's version does not change
// while the daemon runs): placement sends a restore only to a node of
// the snapshot's version.
func (n *Node) runtimeVersions(ctx context.Context) map[string]string {
	v, err := n.m.RuntimeVersions(ctx)
	if err != nil {
		// Placement sends it no restore of that runtime's snapshots.
		n.cfg.Log.Warn("reading the runtimes' versions for the cluster", "op", "cluster", "err", err)
	}
	return v
}

// unbounded stands for a resource the node's manager does not bound.
const unbounded = 1 << 40

func (n *Node) beat(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	for {
		if err := n.beatOnce(ctx); err != nil && ctx.Err() == nil {
			n.cfg.Log.Warn("cluster heartbeat failed", "op", "cluster", "node", n.cfg.Name, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// placedGrace spares a placement bound after the node listed its
// sandboxes from being ended by that heartbeat.
const placedGrace = 30 * time.Second

func (n *Node) beatOnce(ctx context.Context) error {
	sbs, err := n.m.List(ctx)
	if err != nil {
		return err
	}
	var live []store.Live
	for _, sb := range sbs {
		switch {
		case sb.State == sandbox.Creating:
			// Its bind records its state once it runs; a beat listed
			// before and written after would undo that until the next.
			live = append(live, store.Live{ID: sb.ID})
		case !sb.State.Terminal():
			live = append(live, store.Live{ID: sb.ID, State: string(sb.State)})
		}
	}
	// The capacity goes with each beat: free disk and what the manager
	// admits change while the node runs. Each sandbox's state goes too:
	// lists through a control plane show what the node did by itself
	// (an idle auto-pause, a pause on its own API).
	reap, err := n.st.HeartbeatLive(ctx, n.record(), live, placedGrace)
	if err != nil {
		return err
	}
	if err := n.reportImages(ctx); err != nil {
		n.cfg.Log.Warn("reporting the node's images to the cluster", "op", "cluster", "node", n.cfg.Name, "err", err)
	}
	if len(reap) == 0 {
		return nil
	}
	// The cluster gave these up while this node was lost.
	for _, id := range reap {
		if _, err := n.m.Terminate(ctx, id, sandbox.EndLost, nil); err != nil && !errors.Is(err, context.Canceled) {
			n.cfg.Log.Warn("terminating a sandbox the cluster gave up on", "op", "cluster", "sandbox", id, "err", err)
		}
	}
	n.cfg.Log.Info("terminated the sandboxes the cluster gave up on while this node was lost", "op", "cluster", "count", len(reap))
	return n.st.Reaped(ctx, n.cfg.Name, reap)
}

// Handler lets a request carrying this node's credential through to h as
// if it carried the API token (set in process, never on the wire), as a
// bearer for the native API and as the E2B key for /e2b; other requests
// reach h as they came. The node-internal endpoints (internalPrefix) open
// with the credential only.
func (n *Node) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internal := strings.HasPrefix(r.URL.Path, internalPrefix)
		if got := r.Header.Get(nodeauth.Header); got != "" || internal {
			if !nodeauth.Equal(got, n.cred) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":{"code":"unauthenticated","message":"wrong or missing node credential"}}` + "\n"))
				return
			}
			if internal {
				n.internal(w, r)
				return
			}
			r.Header.Del(nodeauth.Header)
			r.Header.Set("Authorization", "Bearer "+n.token)
			r.Header.Set("X-API-KEY", n.cfg.E2BKeyPrefix+n.token)
		}
		h.ServeHTTP(w, r)
	})
}

// Close stops heartbeating (the node goes silent; the cluster marks it
// lost after its bound unless it joins again) and ships its audit trail
// and usage once more.
func (n *Node) Close() {
	n.cancel()
	n.wg.Wait()
	n.st.Close()
}
