package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	imagestore "corral/internal/image/store"
	"corral/pkg/apiv1"
)

// layersMux serves nodeauth.LayersPath; the caller checked the credential.
func (n *Node) layersMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+nodeauth.LayersPath+"{digest}", n.serveUploadedLayer)
	mux.HandleFunc("POST "+nodeauth.LayersPath+"{digest}/fetch", n.serveLayerFetch)
	return mux
}

// serveUploadedLayer streams a layer of the node's store, regenerated
// (imagestore.ExportLayer).
func (n *Node) serveUploadedLayer(w http.ResponseWriter, r *http.Request) {
	d, err := imagestore.ParseDigest(r.PathValue("digest"))
	if err != nil {
		writeError(w, errdefs.Invalid("digest", "%v", err))
		return
	}
	if _, err := n.m.Images().Layer(d); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if err := n.m.Images().ExportLayer(r.Context(), d, w); err != nil {
		n.cfg.Log.Warn("serving an uploaded layer to another node", "op", "cluster", "layer", d, "err", err)
		panic(http.ErrAbortHandler) // a cut stream fails the fetcher's extraction
	}
}

// serveLayerFetch makes layer {digest} present here, fetched from a node
// the cluster says holds it unless this one does, and answers with it.
func (n *Node) serveLayerFetch(w http.ResponseWriter, r *http.Request) {
	d, err := imagestore.ParseDigest(r.PathValue("digest"))
	if err != nil {
		writeError(w, errdefs.Invalid("digest", "%v", err))
		return
	}
	l, err := n.FetchLayer(r.Context(), d)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.LayerInfo{Digest: string(l.Digest), Size: l.Size})
}

// FetchLayer makes uploaded layer d present in the node's store, from
// the first other node the cluster says holds it that hands it over, and
// records it as held here.
func (n *Node) FetchLayer(ctx context.Context, d imagestore.Digest) (imagestore.Layer, error) {
	if l, err := n.m.Images().Layer(d); err == nil {
		return l, n.st.RecordLayer(ctx, store.NodeLayer{Node: n.cfg.Name, Digest: string(d), Size: l.Size})
	}
	holders, err := n.st.LayerHolders(ctx, []string{string(d)})
	if err != nil {
		return imagestore.Layer{}, err
	}
	var errs []error
	for _, h := range holders[string(d)] {
		if h.Node == n.cfg.Name {
			continue
		}
		l, err := n.fetchLayerFrom(ctx, h.Node, d)
		if err == nil {
			n.cfg.Log.Info("fetched an uploaded layer from another node", "op", "cluster", "layer", d, "from", h.Node)
			return l, n.st.RecordLayer(ctx, store.NodeLayer{Node: n.cfg.Name, Digest: string(d), Size: l.Size})
		}
		n.cfg.Log.Warn("fetching an uploaded layer from another node failed", "op", "cluster", "layer", d, "from", h.Node, "err", err)
		errs = append(errs, fmt.Errorf("from node %s: %w", h.Node, err))
	}
	if len(errs) == 0 {
		return imagestore.Layer{}, fmt.Errorf("%w: layer %s is on no other ready node (upload it again)", errdefs.ErrNotFound, d)
	}
	return imagestore.Layer{}, fmt.Errorf("fetching layer %s: %w", d, errors.Join(errs...))
}

func (n *Node) fetchLayerFrom(ctx context.Context, id string, d imagestore.Digest) (imagestore.Layer, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	holder, err := n.st.Node(ctx, id)
	if err != nil {
		return imagestore.Layer{}, err
	}
	base, cred, err := n.target(holder)
	if err != nil {
		return imagestore.Layer{}, err
	}
	body, err := n.get(ctx, base.JoinPath(nodeauth.LayersPath, string(d)), cred)
	if err != nil {
		return imagestore.Layer{}, err
	}
	defer body.Close()
	return n.m.Images().AdoptLayer(ctx, d, body)
}
