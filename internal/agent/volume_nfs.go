package agent

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// Volumes of a vm guest: the guest kernel's NFS client mounts each volume
// from a listener of this agent on the guest's loopback, and every
// connection it makes there is relayed over the agent channel to the
// daemon's NFS server of that volume (docs/ARCHITECTURE.md, "Volumes on
// vm"). Only connections from a privileged port are relayed: the kernel's
// client binds one, while an unprivileged process of the sandbox cannot,
// so it cannot talk NFS to the daemon behind the guest's file permissions.

// nfsRelays are the listeners, by volume index.
type nfsRelays struct {
	mu sync.Mutex
	ls map[int]*nfsRelay
}

// nfsRelay is one volume's listener and the connections accepted on it.
type nfsRelay struct {
	l     *net.TCPListener
	conns chan net.Conn
}

// relay returns volume index's listener, opening it on the first call.
func (n *nfsRelays) relay(index int) (*nfsRelay, error) {
	if index < 0 || index >= agentapi.MaxVolumes {
		return nil, errdefs.Invalid("index", "%d is not a volume index (0 to %d)", index, agentapi.MaxVolumes-1)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if r := n.ls[index]; r != nil {
		return r, nil
	}
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("%w: volume %d: listening on loopback: %v", errdefs.ErrUnavailable, index, err)
	}
	r := &nfsRelay{l: l, conns: make(chan net.Conn)}
	go r.accept()
	if n.ls == nil {
		n.ls = map[int]*nfsRelay{}
	}
	n.ls[index] = r
	return r, nil
}

// accept hands each connection from a privileged port to the next relay
// stream; it runs for the agent's life (volumes stay mounted until the
// guest ends).
func (r *nfsRelay) accept() {
	for {
		c, err := r.l.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if a, ok := c.RemoteAddr().(*net.TCPAddr); !ok || a.Port >= 1024 {
			c.Close()
			continue
		}
		r.conns <- c
	}
}

func (r *nfsRelay) port() int { return r.l.Addr().(*net.TCPAddr).Port }

// volumeRelay is POST /v5/volume/relay?index=I: waits for the guest's
// next NFS connection to volume I, then carries it as this stream (as
// portConnect does a port).
func (s *Server) volumeRelay(w http.ResponseWriter, r *http.Request) error {
	index, err := strconv.Atoi(r.URL.Query().Get("index"))
	if err != nil {
		return errdefs.Invalid("index", "%q is not a volume index", r.URL.Query().Get("index"))
	}
	rel, err := s.nfs.relay(index)
	if err != nil {
		return err
	}
	var conn net.Conn
	select {
	case conn = <-rel.conns:
	case <-r.Context().Done():
		return nil
	}
	spliceStream(w, r, conn.(*net.TCPConn))
	return nil
}

// volumeMount is POST /v5/volume/mount: mounts volume req.Index over NFS
// at req.Path (made if missing). The daemon is already accepting its
// relay, so the mount's own calls reach the server.
func (s *Server) volumeMount(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.VolumeMountRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if !path.IsAbs(req.Path) || path.Clean(req.Path) != req.Path || req.Path == "/" {
		return errdefs.Invalid("path", "%q is not an absolute, clean path below /", req.Path)
	}
	rel, err := s.nfs.relay(req.Index)
	if err != nil {
		return err
	}
	dst := path.Join(s.root, req.Path)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("volume at %s: %w", req.Path, err)
	}
	p := strconv.Itoa(rel.port())
	// hard: a daemon restart stalls the guest's calls instead of failing
	// them; nolock: no lockd (the server has none); noacl: no ACL protocol.
	opts := "vers=3,proto=tcp,mountproto=tcp,hard,nolock,noacl,addr=127.0.0.1,mountaddr=127.0.0.1,port=" + p + ",mountport=" + p
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if req.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("127.0.0.1:/", dst, "nfs", flags, opts); err != nil {
		return fmt.Errorf("mounting the volume at %s over nfs: %w", req.Path, err)
	}
	s.log.Info("volume mounted", "op", "volume", "path", req.Path, "read_only", req.ReadOnly)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
