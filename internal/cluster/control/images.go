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
	"net/http/httputil"
	"slices"
	"strings"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// imageRoutes serves images through the control plane. A build, pull or
// import runs on one node (?node=, or a ready one at random) and is
// recorded as held there once it answers; a list is the cluster
// database's; an inspect asks a node that holds the image; a delete goes
// to every node that holds it. A create names an image the chosen node
// lacks: the node fetches it from a holder first (ensureImage).
func (s *Server) imageRoutes() {
	s.mux.HandleFunc("GET /v1/images", s.auth(s.listImages))
	s.mux.HandleFunc("POST /v1/images/build", s.auth(s.build))
	s.mux.HandleFunc("POST /v1/images/pull", s.auth(s.onNode(readImage)))
	s.mux.HandleFunc("POST /v1/images/import", s.auth(s.onNode(readImage)))
	// A build's copy steps upload their files as layers first (layers.go).
	s.mux.HandleFunc("POST /v1/images/layers", s.auth(s.onNode(readLayer)))
	s.mux.HandleFunc("GET /v1/images/layers/{digest}", s.auth(s.getLayer))
	s.mux.HandleFunc("POST /v1/images/prune", s.auth(s.prune))
	s.mux.HandleFunc("GET /v1/images/{ref...}", s.auth(s.getImage))
	s.mux.HandleFunc("DELETE /v1/images/{ref...}", s.auth(s.deleteImage))
}

// clusterRef is ref as the cluster database keeps it: a digest as it
// is, a tag as name:tag (a bare name is name:latest). Nodes validate it.
func clusterRef(ref string) string {
	if strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	if i := strings.LastIndexByte(ref, ':'); i < 0 || strings.Contains(ref[i+1:], "/") {
		return ref + ":latest"
	}
	return ref
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	rows, err := s.st.Images(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.ImageList{Images: []apiv1.Image{}}
	for _, row := range rows { // by digest
		if n := len(out.Images); n == 0 || out.Images[n-1].Digest != row.Digest {
			out.Images = append(out.Images, apiv1.Image{Digest: row.Digest, Layers: []string{}, Size: row.Size})
		}
		img := &out.Images[len(out.Images)-1]
		img.Nodes = append(img.Nodes, row.Node)
		for _, t := range row.Tags {
			if !slices.Contains(img.Tags, t) {
				img.Tags = append(img.Tags, t)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// getImage answers with a holder's description of the image, and the
// nodes that hold it.
func (s *Server) getImage(w http.ResponseWriter, r *http.Request) {
	holders, err := s.st.ImageHolders(r.Context(), clusterRef(r.PathValue("ref")))
	if err != nil {
		s.writeError(w, err)
		return
	}
	var last error
	for _, h := range holders {
		a, err := s.callNodeID(r.Context(), h.Node, http.MethodGet, "/v1/images/"+h.Digest, nil)
		if err == nil && a.status != http.StatusOK {
			err = fmt.Errorf("node %s answered %d: %s", h.Node, a.status, bytes.TrimSpace(a.body))
		}
		if err != nil {
			last = err
			continue
		}
		var img apiv1.Image
		if err := json.Unmarshal(a.body, &img); err != nil {
			last = err
			continue
		}
		for _, h := range holders {
			img.Nodes = append(img.Nodes, h.Node)
		}
		writeJSON(w, http.StatusOK, img)
		return
	}
	s.writeError(w, fmt.Errorf("%w: image %s: no node that holds it answered: %v", errdefs.ErrUnavailable, r.PathValue("ref"), last))
}

// deleteImage deletes ref on every node that holds it (a tag: untags it
// there). Nodes that no longer have it count as done.
func (s *Server) deleteImage(w http.ResponseWriter, r *http.Request) {
	ref := clusterRef(r.PathValue("ref"))
	rows, err := s.st.ImageRows(r.Context(), ref)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if len(rows) == 0 {
		s.writeError(w, fmt.Errorf("%w: image %s is on no ready node of the cluster", errdefs.ErrNotFound, ref))
		return
	}
	ctx := context.WithoutCancel(r.Context())
	done := map[string]bool{}
	for _, row := range rows {
		if done[row.Node] {
			continue
		}
		done[row.Node] = true
		a, err := s.callNodeID(ctx, row.Node, http.MethodDelete, "/v1/images/"+ref, nil)
		if err != nil {
			s.writeError(w, fmt.Errorf("%w: deleting image %s on node %s: %v", errdefs.ErrUnavailable, ref, row.Node, err))
			return
		}
		if a.status != http.StatusNoContent && a.status != http.StatusNotFound {
			relay(w, a) // in use there, say
			return
		}
		if strings.HasPrefix(ref, "sha256:") {
			err = s.st.ForgetImage(ctx, row.Node, ref)
		} else {
			err = s.st.UntagImage(ctx, row.Node, ref)
		}
		if err != nil {
			s.writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// callNodeID is callNode (call.go) to node id, with a JSON body.
func (s *Server) callNodeID(ctx context.Context, id, method, path string, body []byte) (nodeAnswer, error) {
	n, err := s.st.Node(ctx, id)
	if err != nil {
		return nodeAnswer{}, err
	}
	return s.callNode(ctx, n, method, path, bytes.NewReader(body), "application/json")
}

// ensureImage makes node n hold the image a create names before the
// create goes there: a node that lacks it fetches it, by digest, from
// one that holds it. An image no ready node holds is left to n (which
// may hold it unreported yet, or answers 404).
func (s *Server) ensureImage(ctx context.Context, n store.Node, image string) error {
	if image == "" || image == "base" {
		return nil
	}
	ref := clusterRef(image)
	holders, err := s.st.ImageHolders(ctx, ref)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if slices.ContainsFunc(holders, func(h store.NodeImage) bool { return h.Node == n.ID }) {
		return nil
	}
	var req nodeauth.FetchRequest
	if ref != holders[0].Digest {
		req.Tags = []string{ref}
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	a, err := s.callNode(ctx, n, http.MethodPost, nodeauth.ImagesPath+holders[0].Digest+"/fetch", bytes.NewReader(body), "application/json")
	if err != nil {
		return fmt.Errorf("node %s fetching image %s: %w", n.ID, ref, err)
	}
	if a.status != http.StatusOK {
		return fmt.Errorf("node %s fetching image %s: %d: %s", n.ID, ref, a.status, bytes.TrimSpace(a.body))
	}
	s.log.InfoContext(ctx, "a node fetched a create's image from another", "op", "cluster", "node", n.ID, "image", holders[0].Digest)
	return nil
}

// imageWatcher sees a node's successful answer to an image call and
// records what it made there (nodeRecorder).
type imageWatcher func(resp *http.Response, rec nodeRecorder)

// nodeRecorder records in the cluster database what an image call made
// on a node.
type nodeRecorder struct {
	s    *Server
	node string
	ctx  context.Context
}

func (nr nodeRecorder) image(img apiv1.Image) {
	ctx, cancel := context.WithTimeout(nr.ctx, 10*time.Second)
	defer cancel()
	if err := nr.s.st.RecordImage(ctx, store.NodeImage{Node: nr.node, Digest: img.Digest, Tags: img.Tags, Size: img.Size}); err != nil {
		nr.s.log.Warn("recording an image's node", "op", "cluster", "node", nr.node, "image", img.Digest, "err", err)
	}
}

func (nr nodeRecorder) layer(l apiv1.LayerInfo) {
	ctx, cancel := context.WithTimeout(nr.ctx, 10*time.Second)
	defer cancel()
	if err := nr.s.st.RecordLayer(ctx, store.NodeLayer{Node: nr.node, Digest: l.Digest, Size: l.Size}); err != nil {
		nr.s.log.Warn("recording a layer's node", "op", "cluster", "node", nr.node, "layer", l.Digest, "err", err)
	}
}

// onNode proxies an image call to one node (imageNode), streaming (a
// build's progress events pass as they come), and records what it made
// there.
func (s *Server) onNode(watch imageWatcher) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, err := s.imageNode(r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		s.proxyImageCall(w, r, n, watch)
	}
}

// proxyImageCall proxies an image call to node n.
func (s *Server) proxyImageCall(w http.ResponseWriter, r *http.Request, n store.Node, watch imageWatcher) {
	target, cred, err := s.nodeTarget(n)
	if err != nil {
		s.writeError(w, err)
		return
	}
	rec := nodeRecorder{s: s, node: n.ID, ctx: context.WithoutCancel(r.Context())}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			q := pr.Out.URL.Query()
			q.Del("node")
			pr.Out.URL.RawQuery = q.Encode()
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set(nodeauth.Header, cred)
		},
		Transport:     s.client.Transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			s.writeError(w, fmt.Errorf("%w: node %s does not answer: %v", errdefs.ErrUnavailable, n.ID, err))
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusOK {
				watch(resp, rec)
			}
			return nil
		},
	}
	fullDuplex(w) // a build's body may still be on its way when its progress starts
	rp.ServeHTTP(w, r)
}

// imageNode is the node an image call runs on: ?node=, or a ready,
// undrained, fresh node at random.
func (s *Server) imageNode(r *http.Request) (store.Node, error) {
	if id := r.URL.Query().Get("node"); id != "" {
		return s.namedImageNode(r.Context(), id)
	}
	ns, err := s.imageNodes(r.Context())
	if err != nil {
		return store.Node{}, err
	}
	return ns[rand.IntN(len(ns))], nil
}

// namedImageNode is node id, which must be ready.
func (s *Server) namedImageNode(ctx context.Context, id string) (store.Node, error) {
	n, err := s.st.Node(ctx, id)
	if err != nil {
		return store.Node{}, err
	}
	if n.State != store.NodeReady {
		return store.Node{}, fmt.Errorf("%w: node %s is %s", errdefs.ErrFailedPrecondition, id, n.State)
	}
	return n, nil
}

// imageNodes are the ready, undrained, fresh nodes (at least one).
func (s *Server) imageNodes(ctx context.Context) ([]store.Node, error) {
	ns, err := s.st.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	ns = slices.DeleteFunc(ns, func(n store.Node) bool {
		return n.State != store.NodeReady || n.Draining || time.Since(n.Heartbeat) > s.cfg.LostAfter
	})
	if len(ns) == 0 {
		return nil, fmt.Errorf("%w: no ready node to run it on", errdefs.ErrUnavailable)
	}
	return ns, nil
}

// readImage reads a pull's or import's answer (an image) and puts it back.
func readImage(resp *http.Response, rec nodeRecorder) {
	var img apiv1.Image
	if readBack(resp, &img) && img.Digest != "" {
		rec.image(img)
	}
}

// readLayer reads a layer upload's answer and puts it back.
func readLayer(resp *http.Response, rec nodeRecorder) {
	var l apiv1.LayerInfo
	if readBack(resp, &l) && l.Digest != "" {
		rec.layer(l)
	}
}

// readBack decodes a JSON answer into v and puts the body back for the
// caller.
func readBack(resp *http.Response, v any) bool {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
	return err == nil && json.Unmarshal(b, v) == nil
}

// errReader returns err (io.EOF when nil).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// watchBuild passes a build's event stream on as it comes and records
// the image of its done event.
func watchBuild(resp *http.Response, rec nodeRecorder) {
	resp.Body = &buildWatcher{rc: resp.Body, record: rec.image}
}

// buildWatcher reads NDJSON build events through, line by line.
type buildWatcher struct {
	rc     io.ReadCloser
	record func(apiv1.Image)
	line   []byte
	over   bool // the line passed maxEventLine: not an event to read
}

// maxEventLine bounds the line kept while it is read.
const maxEventLine = 1 << 20

func (b *buildWatcher) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	chunk := p[:n]
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			b.add(chunk)
			break
		}
		b.add(chunk[:i])
		if !b.over {
			b.event(b.line)
		}
		b.line, b.over, chunk = b.line[:0], false, chunk[i+1:]
	}
	return n, err
}

func (b *buildWatcher) add(p []byte) {
	if b.over || len(b.line)+len(p) > maxEventLine {
		b.over = true
		return
	}
	b.line = append(b.line, p...)
}

func (b *buildWatcher) event(line []byte) {
	var ev apiv1.BuildEvent
	if json.Unmarshal(line, &ev) == nil && ev.Type == apiv1.BuildEventDone && ev.Image != nil {
		b.record(*ev.Image)
	}
}

func (b *buildWatcher) Close() error { return b.rc.Close() }
