package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	imagestore "corral/internal/image/store"
)

// Record is an image's record as nodes hand it to each other: what its
// digest covers (layers and config), and its tags on the holder.
type Record struct {
	Digest string                 `json:"digest"`
	Layers []imagestore.Digest    `json:"layers"`
	Config imagestore.ImageConfig `json:"config"`
	Tags   []string               `json:"tags,omitempty"`
}

// imagesMux serves nodeauth.ImagesPath; the caller checked the credential.
func (n *Node) imagesMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+nodeauth.ImagesPath+"{digest}", n.serveRecord)
	mux.HandleFunc("GET "+nodeauth.ImagesPath+"{digest}/layers/{layer}", n.serveLayer)
	mux.HandleFunc("POST "+nodeauth.ImagesPath+"{digest}/fetch", n.serveFetch)
	return mux
}

func (n *Node) serveRecord(w http.ResponseWriter, r *http.Request) {
	rec, err := n.imageRecord(r.PathValue("digest"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// serveLayer streams one of the image's layers, regenerated from the
// store (imagestore.ExportLayer).
func (n *Node) serveLayer(w http.ResponseWriter, r *http.Request) {
	rec, err := n.imageRecord(r.PathValue("digest"))
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := imagestore.ParseDigest(r.PathValue("layer"))
	if err != nil || !containsDigest(rec.Layers, d) {
		writeError(w, fmt.Errorf("%w: image %s has no layer %q", errdefs.ErrNotFound, rec.Digest, r.PathValue("layer")))
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if err := n.m.Images().ExportLayer(r.Context(), d, w); err != nil {
		// The status is sent: a cut stream fails the fetcher's extraction.
		n.cfg.Log.Warn("serving a layer to another node", "op", "cluster", "layer", d, "err", err)
		panic(http.ErrAbortHandler)
	}
}

func containsDigest(ds []imagestore.Digest, d imagestore.Digest) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// imageRecord is image digest's record from the node's store; only a digest
// names one (a tag is the cluster's to resolve).
func (n *Node) imageRecord(ref string) (Record, error) {
	d, err := imagestore.ParseDigest(ref)
	if err != nil {
		return Record{}, errdefs.Invalid("digest", "%v", err)
	}
	img, err := n.m.Images().Get(string(d))
	if err != nil {
		return Record{}, err
	}
	return Record{Digest: string(img.Digest), Layers: img.Layers, Config: img.Config, Tags: img.Tags}, nil
}

// serveFetch fetches image {digest} from a node that holds it, unless
// this one does, and answers with its record.
func (n *Node) serveFetch(w http.ResponseWriter, r *http.Request) {
	d, err := imagestore.ParseDigest(r.PathValue("digest"))
	if err != nil {
		writeError(w, errdefs.Invalid("digest", "%v", err))
		return
	}
	var req nodeauth.FetchRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, errdefs.Invalid("body", "%v", err))
		return
	}
	for _, t := range req.Tags {
		if _, err := imagestore.ParseRef(t); err != nil {
			writeError(w, errdefs.Invalid("tags", "%v", err))
			return
		}
	}
	if err := n.Fetch(r.Context(), d, req.Tags); err != nil {
		writeError(w, err)
		return
	}
	rec, err := n.imageRecord(string(d))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// fetchTimeout bounds one fetch of an image from one holder.
const fetchTimeout = 10 * time.Minute

// Fetch makes image d (tagged tags) present in the node's store: from
// the first node the cluster says holds it that hands it over whole.
// The record received must hash to d before any layer is read; the
// layers then come under the digests it lists. The image is recorded as
// held here at once.
func (n *Node) Fetch(ctx context.Context, d imagestore.Digest, tags []string) error {
	if _, err := n.m.Images().Get(string(d)); err == nil {
		return n.tagAndRecord(ctx, d, tags)
	}
	holders, err := n.st.ImageHolders(ctx, string(d))
	if err != nil {
		return fmt.Errorf("fetching image %s: %w", d, err)
	}
	var errs []error
	for _, h := range holders {
		if h.Node == n.cfg.Name {
			continue
		}
		err := n.fetchFrom(ctx, h.Node, d, tags)
		if err == nil {
			n.cfg.Log.Info("fetched an image from another node", "op", "cluster", "image", d, "from", h.Node)
			return n.tagAndRecord(ctx, d, tags)
		}
		n.cfg.Log.Warn("fetching an image from another node failed", "op", "cluster", "image", d, "from", h.Node, "err", err)
		errs = append(errs, fmt.Errorf("from node %s: %w", h.Node, err))
	}
	if len(errs) == 0 {
		return fmt.Errorf("%w: fetching image %s: no other node holds it", errdefs.ErrNotFound, d)
	}
	return fmt.Errorf("fetching image %s: %w", d, errors.Join(errs...))
}

func (n *Node) tagAndRecord(ctx context.Context, d imagestore.Digest, tags []string) error {
	got, err := n.m.Images().Tag(d, tags)
	if err != nil {
		return err
	}
	return n.st.RecordImage(ctx, store.NodeImage{Node: n.cfg.Name, Digest: string(got.Digest), Tags: got.Tags, Size: got.Size})
}

// fetchFrom fetches image d from node id.
func (n *Node) fetchFrom(ctx context.Context, id string, d imagestore.Digest, tags []string) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	holder, err := n.st.Node(ctx, id)
	if err != nil {
		return err
	}
	base, cred, err := n.target(holder)
	if err != nil {
		return err
	}
	body, err := n.get(ctx, base.JoinPath(nodeauth.ImagesPath, string(d)), cred)
	if err != nil {
		return err
	}
	var rec Record
	err = json.NewDecoder(io.LimitReader(body, 4<<20)).Decode(&rec)
	body.Close()
	if err != nil {
		return fmt.Errorf("reading the image's record: %w", err)
	}
	open := func(ctx context.Context, l imagestore.Digest) (io.ReadCloser, error) {
		return n.get(ctx, base.JoinPath(nodeauth.ImagesPath, string(d), "layers", string(l)), cred)
	}
	_, err = n.m.Images().Adopt(ctx, d, rec.Layers, rec.Config, tags, open)
	return err
}

// target is node h's API base URL and the credential that opens it,
// derived from the join token and checked against the hash h registered.
func (n *Node) target(h store.Node) (*url.URL, string, error) {
	u, err := url.Parse(h.Address)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, "", fmt.Errorf("%w: node %s's address %q is not an http(s) URL", errdefs.ErrUnavailable, h.ID, h.Address)
	}
	cred := nodeauth.Credential(n.join, h.ID, h.CredentialNonce)
	if !nodeauth.Equal(nodeauth.Hash(cred), h.CredentialHash) {
		return nil, "", fmt.Errorf("%w: node %s's credential does not derive from this node's join token", errdefs.ErrUnavailable, h.ID)
	}
	return u, cred, nil
}

// get GETs u with the node credential cred; a non-200 answer is an
// error carrying the holder's message.
func (n *Node) get(ctx context.Context, u *url.URL, cred string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(nodeauth.Header, cred)
	resp, err := n.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errdefs.ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %s answered %d: %s", errdefs.ErrUnavailable, u.Path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return resp.Body, nil
}

// reportImages sends the node's images and ready warm sandboxes
// (heartbeat) when they changed since the last report, and every
// reportEvery beats all the same (which drops, past their grace, rows a
// control plane recorded for images the node no longer has). A daemon
// with no image store reports none.
func (n *Node) reportImages(ctx context.Context) error {
	var imgs []store.NodeImage
	list, err := n.m.Images().List()
	if err != nil && !errors.Is(err, errdefs.ErrNotSupported) {
		return err
	}
	for _, img := range list {
		imgs = append(imgs, store.NodeImage{Digest: string(img.Digest), Tags: img.Tags, Size: img.Size})
	}
	warm := map[string]int{}
	for _, p := range n.m.WarmPools() {
		warm[store.WarmKey(p.Spec.Runtime, p.Spec.Image)] += p.Ready
	}
	sum, _ := json.Marshal(struct {
		I []store.NodeImage
		W map[string]int
	}{imgs, warm})
	n.beats++
	if bytes.Equal(sum, n.reported) && n.beats%reportEvery != 0 {
		return nil
	}
	if err := n.st.ReportImages(ctx, n.cfg.Name, nodeauth.Hash(n.cred), imgs, warm); err != nil {
		return err
	}
	n.reported = sum
	return nil
}

// reportEvery is how many heartbeats may pass with an unchanged report
// unsent.
const reportEvery = 12
