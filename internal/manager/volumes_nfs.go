package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/sandbox"
	"corral/internal/volume/nfsd"
)

// Volumes on vm: the guest mounts each of its volumes over NFSv3 from
// its agent's loopback listener, which relays every connection over the
// agent channel to an NFS server of this daemon that serves the volume's
// host mount, the same one gvisor sandboxes bind (docs/ARCHITECTURE.md,
// "Volumes on vm"). One server per mount of a sandbox: it knows that one
// volume only, read-only when the mount is, so a guest reaches no other
// volume and cannot write a read-only one, whatever it sends.

// relayRetry is the pause before asking the agent for the next relay
// after one failed (the connection is going away, or a brief error).
const relayRetry = 200 * time.Millisecond

// serveVolumesNFS starts the NFS servers of a vm sandbox's volumes and
// their relays over client; they stop when client's connection ends
// (the sandbox's end, or a reconnect, which calls this again). The
// volumes must be mounted on the host (mountVolumes did).
func (m *Manager) serveVolumesNFS(h *handle.Handle, client *agentapi.Client, spec sandbox.Spec) error {
	if spec.Runtime != "vm" || len(spec.Volumes) == 0 {
		return nil
	}
	if len(spec.Volumes) > agentapi.MaxVolumes {
		return fmt.Errorf("sandbox %s: at most %d volumes on vm", h.ID(), agentapi.MaxVolumes)
	}
	st, err := m.volumes()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(m.ctx)
	var servers []*nfsd.Server
	stop := func() {
		cancel()
		for _, s := range servers {
			s.Close()
		}
	}
	for i, v := range spec.Volumes {
		unlock := st.Lock(v.Name)
		dir, err := st.HostDir(ctx, v.Name)
		unlock()
		if err != nil {
			stop()
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
		srv, err := nfsd.NewServer(m.cfg.AgentBinary, dir, v.ReadOnly)
		if err != nil {
			stop()
			return fmt.Errorf("volume %q: nfs server: %w", v.Name, err)
		}
		servers = append(servers, srv)
		go m.relayVolume(ctx, h.ID(), client, i, srv)
	}
	var once sync.Once
	stopOnce := func() { once.Do(stop) }
	m.nfs.set(h.ID(), stopOnce)
	go func() {
		select {
		case <-client.Done():
		case <-m.ctx.Done():
		}
		stopOnce()
	}()
	return nil
}

// nfsServing are the stops of the live sandboxes' volume servers, by
// sandbox id: forget runs a sandbox's at its end, so that by the time no
// live sandbox holds a volume no server holds it open either (its host
// mount can go).
type nfsServing struct {
	mu    sync.Mutex
	stops map[string]func()
}

// set records id's stop, running the one it replaces (a reconnect's).
func (n *nfsServing) set(id string, stop func()) {
	n.mu.Lock()
	old := n.stops[id]
	if n.stops == nil {
		n.stops = map[string]func(){}
	}
	n.stops[id] = stop
	n.mu.Unlock()
	if old != nil {
		old()
	}
}

// stop stops id's servers, if it has any.
func (n *nfsServing) stop(id string) {
	n.mu.Lock()
	s := n.stops[id]
	delete(n.stops, id)
	n.mu.Unlock()
	if s != nil {
		s()
	}
}

// relayVolume keeps one relay of volume index waiting in the agent and
// hands each connection it brings to srv.
func (m *Manager) relayVolume(ctx context.Context, id string, client *agentapi.Client, index int, srv *nfsd.Server) {
	for ctx.Err() == nil {
		conn, err := client.AcceptVolumeNFS(ctx, index)
		if errors.Is(err, errdefs.ErrNotSupported) {
			m.log.Warn("volume relay: the agent is too old", "sandbox", id, "op", "volume", "err", err)
			return
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-client.Done():
				return
			case <-time.After(relayRetry):
			}
			m.log.Debug("volume relay", "sandbox", id, "op", "volume", "index", index, "err", err)
			continue
		}
		if err := srv.Serve(conn); err != nil {
			conn.Close()
			if errors.Is(err, nfsd.ErrClosed) {
				return
			}
			m.log.Warn("volume relay refused", "sandbox", id, "op", "volume", "index", index, "err", err)
		}
	}
}

// mountVolumesNFS serves a new vm sandbox's volumes and has its agent
// mount them, before anything of the sandbox runs.
func (m *Manager) mountVolumesNFS(ctx context.Context, h *handle.Handle, client *agentapi.Client, spec sandbox.Spec) error {
	if spec.Runtime != "vm" || len(spec.Volumes) == 0 {
		return nil
	}
	if err := m.serveVolumesNFS(h, client, spec); err != nil {
		return err
	}
	for i, v := range spec.Volumes {
		if err := client.MountVolume(ctx, agentapi.VolumeMountRequest{Index: i, Path: v.Path, ReadOnly: v.ReadOnly}); err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}
