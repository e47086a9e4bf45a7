package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// prune prunes every ready node's image store and answers with the
// reports merged (what each node kept names the node); what a node
// pruned leaves the cluster's records at once. A node that fails is
// named after the others are done: prune again.
func (s *Server) prune(w http.ResponseWriter, r *http.Request) {
	ctx := context.WithoutCancel(r.Context())
	ns, err := s.st.Nodes(ctx)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.PruneReport{Images: []string{}, Layers: []string{}, Kept: []apiv1.PruneKept{}}
	var failed []error
	for _, n := range ns {
		if n.State != store.NodeReady {
			continue
		}
		rep, err := s.pruneNode(ctx, n)
		if err != nil {
			failed = append(failed, err)
			continue
		}
		mergePrune(&out, rep, n.ID)
	}
	if len(failed) > 0 {
		s.writeError(w, fmt.Errorf("%w: pruning: %v", errdefs.ErrUnavailable, errors.Join(failed...)))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// pruneNode prunes node n and forgets what it pruned.
func (s *Server) pruneNode(ctx context.Context, n store.Node) (apiv1.PruneReport, error) {
	var rep apiv1.PruneReport
	a, err := s.callNode(ctx, n, http.MethodPost, "/v1/images/prune", nil, "")
	if err != nil {
		return rep, fmt.Errorf("node %s: %w", n.ID, err)
	}
	if a.status != http.StatusOK {
		return rep, fmt.Errorf("node %s answered %d: %s", n.ID, a.status, a.body)
	}
	if err := json.Unmarshal(a.body, &rep); err != nil {
		return rep, fmt.Errorf("node %s: reading its report: %w", n.ID, err)
	}
	for _, d := range rep.Images {
		err = errors.Join(err, s.st.ForgetImage(ctx, n.ID, d))
	}
	for _, d := range rep.Layers {
		err = errors.Join(err, s.st.ForgetLayer(ctx, n.ID, d))
	}
	if err != nil {
		s.log.Warn("forgetting what a node pruned", "op", "cluster", "node", n.ID, "err", err)
	}
	return rep, nil
}

// mergePrune adds node's report to out: digests once each, bytes summed,
// what it kept with its name.
func mergePrune(out *apiv1.PruneReport, rep apiv1.PruneReport, node string) {
	for _, d := range rep.Images {
		if !slices.Contains(out.Images, d) {
			out.Images = append(out.Images, d)
		}
	}
	for _, d := range rep.Layers {
		if !slices.Contains(out.Layers, d) {
			out.Layers = append(out.Layers, d)
		}
	}
	out.Bytes += rep.Bytes
	for _, k := range rep.Kept {
		k.Node = node
		out.Kept = append(out.Kept, k)
	}
}
