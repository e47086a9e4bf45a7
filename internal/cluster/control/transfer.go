package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// transferTimeout bounds one snapshot's relay from node to node (its
// memory image, gigabytes for a large sandbox).
const transferTimeout = 15 * time.Minute

// ensureSnapshot makes node n hold the snapshot whose locations are
// locs: when it does not, the snapshot's image is fetched there if the
// cluster knows it (ensureImage), then the snapshot is relayed to it from a ready
// holder and the new location recorded, so later restores there reuse
// it. n's refusal (another runtime version, no room, its image missing)
// is returned as n said it; a holder that fails is left for the next.
func (s *Server) ensureSnapshot(ctx context.Context, n store.Node, locs []store.SnapshotLocation) error {
	for _, l := range locs {
		if l.Node == n.ID {
			return nil
		}
	}
	// The node refuses a snapshot whose image it lacks: that comes first.
	var rec apiv1.Snapshot
	if json.Unmarshal(locs[0].Record, &rec) == nil {
		if err := s.ensureImage(ctx, n, rec.Image); err != nil {
			return err
		}
	}
	var last error
	for _, l := range locs {
		holder, err := s.st.Node(ctx, l.Node)
		if err != nil || holder.State != store.NodeReady {
			continue
		}
		err = s.relaySnapshot(ctx, holder, n, l)
		if err == nil {
			s.log.InfoContext(ctx, "snapshot relayed between nodes", "op", "cluster", "snapshot", l.ID, "from", holder.ID, "to", n.ID)
			return nil
		}
		if !errors.Is(err, errSource) {
			return err
		}
		last = err
		s.log.WarnContext(ctx, "a snapshot's holder failed its export", "op", "cluster", "snapshot", l.ID, "node", holder.ID, "err", err)
	}
	if last == nil {
		last = errors.New("no holder is ready")
	}
	return fmt.Errorf("%w: snapshot %s: no node that holds it could send it: %v", errdefs.ErrUnavailable, locs[0].ID, last)
}

// errSource marks a failure of the node sending a snapshot, not of the
// one receiving it.
var errSource = errors.New("the sending node failed")

// relaySnapshot streams snapshot l from node from into node to: the
// export's body is the import's, through this control plane, which
// already holds both nodes' credentials and reaches both (nodes need
// not reach each other, nor hold each other's credential).
func (s *Server) relaySnapshot(ctx context.Context, from, to store.Node, l store.SnapshotLocation) error {
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	target, cred, err := s.nodeTarget(from)
	if err != nil {
		return fmt.Errorf("%w: %v", errSource, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.JoinPath(apiv1.NodeSnapshotExport, l.ID).String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(nodeauth.Header, cred)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: node %s: %v", errSource, from.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("%w: node %s: %v", errSource, from.ID, nodeAnswer{status: resp.StatusCode, body: b}.err())
	}
	src := &watchedReader{r: resp.Body}
	a, err := s.callNode(ctx, to, http.MethodPost, apiv1.NodeSnapshotImport, src, "application/x-tar")
	if src.failed() != nil {
		return fmt.Errorf("%w: node %s's stream broke: %v", errSource, from.ID, src.failed())
	}
	if err != nil {
		return err
	}
	if err := a.err(); err != nil && !errors.Is(err, errdefs.ErrAlreadyExists) {
		return fmt.Errorf("sending snapshot %s to node %s: %w", l.ID, to.ID, err)
	} else if err != nil {
		// It may hold that very snapshot already (the cluster lost
		// track of it), or another of that name.
		if chk, cerr := s.callNode(ctx, to, http.MethodGet, "/v1/snapshots/"+l.ID, nil, ""); cerr != nil || chk.status != http.StatusOK {
			return fmt.Errorf("sending snapshot %s to node %s: %w", l.ID, to.ID, err)
		}
	}
	l.Node = to.ID
	return s.st.AddSnapshot(context.WithoutCancel(ctx), l)
}

// watchedReader remembers its source's read error, so a stream cut by
// the sender is not taken for a bad stream by the receiver.
type watchedReader struct {
	r   io.Reader
	mu  sync.Mutex
	err error
}

func (w *watchedReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}
	return n, err
}

func (w *watchedReader) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
