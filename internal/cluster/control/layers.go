package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// A build's copy steps upload their files as layers (POST
// /v1/images/layers) before the build names them. Through a control
// plane an upload lands on a node at random and is recorded there
// (node_layers); the build then runs on the node holding most of its
// layers (and its base image), which first fetches the rest from their
// holders, node to node.

// maxBuildBody bounds a build request read by the control plane, as the
// node's API does.
const maxBuildBody = 8 << 20

// build places a build where its layers are and relays it there.
func (s *Server) build(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBuildBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = errdefs.Invalid("body", "larger than %d bytes", mbe.Limit)
		}
		s.writeError(w, err)
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	// A body the node refuses goes there as it came, for the node's words.
	var req apiv1.BuildRequest
	_ = json.Unmarshal(body, &req)
	layers := copyLayers(req.Spec)
	holders, err := s.st.LayerHolders(r.Context(), layers)
	if err != nil {
		s.writeError(w, err)
		return
	}
	n, err := s.buildNode(r, req.Spec.Base.Image, holders)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.ensureLayers(r.Context(), n, layers, holders); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.ensureImage(r.Context(), n, req.Spec.Base.Image); err != nil {
		s.writeError(w, err)
		return
	}
	s.proxyImageCall(w, r, n, watchBuild)
}

// copyLayers are the layers a build's copy steps name, each once.
func copyLayers(spec apiv1.BuildSpec) []string {
	var out []string
	for _, st := range spec.Steps {
		if st.Copy != nil && st.Copy.Layer != "" && !slices.Contains(out, st.Copy.Layer) {
			out = append(out, st.Copy.Layer)
		}
	}
	return out
}

// buildNode is ?node=, or of the nodes a build may run on one holding
// the most of its layers (its base image counting as one), at random
// among equals.
func (s *Server) buildNode(r *http.Request, base string, holders map[string][]store.NodeLayer) (store.Node, error) {
	if id := r.URL.Query().Get("node"); id != "" {
		return s.namedImageNode(r.Context(), id)
	}
	ns, err := s.imageNodes(r.Context())
	if err != nil {
		return store.Node{}, err
	}
	score := map[string]int{}
	for _, hs := range holders {
		for _, h := range hs {
			score[h.Node]++
		}
	}
	if base != "" && base != "base" {
		if hs, err := s.st.ImageHolders(r.Context(), clusterRef(base)); err == nil {
			for _, h := range hs {
				score[h.Node]++
			}
		}
	}
	rand.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
	best := ns[0]
	for _, n := range ns[1:] {
		if score[n.ID] > score[best.ID] {
			best = n
		}
	}
	return best, nil
}

// ensureLayers has node n fetch each of layers it lacks from a holder.
// A layer no ready node holds is left to n's build, which names it.
func (s *Server) ensureLayers(ctx context.Context, n store.Node, layers []string, holders map[string][]store.NodeLayer) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	for _, d := range layers {
		hs := holders[d]
		if len(hs) == 0 || slices.ContainsFunc(hs, func(h store.NodeLayer) bool { return h.Node == n.ID }) {
			continue
		}
		a, err := s.callNode(ctx, n, http.MethodPost, nodeauth.LayersPath+d+"/fetch", nil, "")
		if err != nil {
			return fmt.Errorf("%w: node %s fetching layer %s: %v", errdefs.ErrUnavailable, n.ID, d, err)
		}
		if a.status != http.StatusOK {
			return fmt.Errorf("%w: node %s fetching layer %s: %d: %s", errdefs.ErrUnavailable, n.ID, d, a.status, bytes.TrimSpace(a.body))
		}
		s.log.InfoContext(ctx, "a node fetched a build's layer from another", "op", "cluster", "node", n.ID, "layer", d)
	}
	return nil
}

// getLayer says whether the cluster holds an uploaded layer: a holder
// node is asked, and one that no longer has it is forgotten.
func (s *Server) getLayer(w http.ResponseWriter, r *http.Request) {
	d := r.PathValue("digest")
	holders, err := s.st.LayerHolders(r.Context(), []string{d})
	if err != nil {
		s.writeError(w, err)
		return
	}
	for _, h := range holders[d] {
		a, err := s.callNodeID(r.Context(), h.Node, http.MethodGet, "/v1/images/layers/"+d, nil)
		if err != nil {
			continue // another holder may answer
		}
		if a.status == http.StatusNotFound {
			if err := s.st.ForgetLayer(context.WithoutCancel(r.Context()), h.Node, d); err != nil {
				s.log.Warn("forgetting a layer's node", "op", "cluster", "node", h.Node, "layer", d, "err", err)
			}
			continue
		}
		relay(w, a) // the layer, or the node's words on a bad digest
		return
	}
	s.writeError(w, fmt.Errorf("%w: layer %s is on no ready node of the cluster", errdefs.ErrNotFound, d))
}
