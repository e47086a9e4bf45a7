package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/volume"
	"corral/pkg/apiv1"
)

// Volumes through a control plane: a volume lives on one node (its ext4
// image is in that node's state directory). A create places it on a
// ready node with the disk for it (?node= names one) and records where
// (store.PlaceVolume); every other call on it goes to that node; a
// sandbox that mounts volumes is placed on the node that holds them all
// (volumeNode).

// volumeCallTimeout bounds a volume call answered whole (create, get,
// delete: a create allocates the image).
const volumeCallTimeout = 2 * time.Minute

func (s *Server) volumeRoutes() {
	s.mux.HandleFunc("POST /v1/volumes", s.auth(s.createVolume))
	s.mux.HandleFunc("GET /v1/volumes", s.auth(s.listVolumes))
	s.mux.HandleFunc("GET /v1/volumes/{name}", s.auth(s.getVolume))
	s.mux.HandleFunc("DELETE /v1/volumes/{name}", s.auth(s.deleteVolume))
	s.mux.HandleFunc("GET /v1/volumes/{name}/files", s.auth(s.proxyVolume))
	s.mux.HandleFunc("PUT /v1/volumes/{name}/files", s.auth(s.proxyVolume))
	s.mux.HandleFunc("GET /v1/volumes/{name}/list", s.auth(s.proxyVolume))
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) {
	var req apiv1.CreateVolumeRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.writeError(w, fmt.Errorf("%w: body: %v", errdefs.ErrInvalidArgument, err))
		return
	}
	if err := volume.CheckName("name", req.Name); err != nil {
		s.writeError(w, err)
		return
	}
	if req.SizeGiB == 0 {
		req.SizeGiB = volume.DefaultSizeGiB
	}
	if req.SizeGiB < 0 || req.SizeGiB > volume.MaxSizeGiB {
		s.writeError(w, errdefs.Invalid("size_gib", "must be between 1 and %d, got %d", volume.MaxSizeGiB, req.SizeGiB))
		return
	}
	n, err := s.st.PlaceVolume(r.Context(), req.Name, req.SizeGiB, r.URL.Query().Get("node"), s.cfg.LostAfter)
	if err != nil {
		s.writeError(w, err)
		return
	}
	// The row holds the name while the node makes the image; a node that
	// fails or refuses it gives the name back.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), volumeCallTimeout)
	defer cancel()
	body, _ := json.Marshal(req)
	a, err := s.callNode(ctx, n, http.MethodPost, "/v1/volumes", bytes.NewReader(body), "application/json")
	if err != nil || a.status != http.StatusCreated {
		s.forgetVolume(ctx, req.Name)
		if err != nil {
			s.writeError(w, err)
			return
		}
		relay(w, a)
		return
	}
	s.log.InfoContext(r.Context(), "volume created", "op", "cluster", "volume", req.Name, "node", n.ID, "size_gib", req.SizeGiB)
	s.relayVolume(w, a, n.ID)
}

func (s *Server) forgetVolume(ctx context.Context, name string) {
	if err := s.st.RemoveVolume(context.WithoutCancel(ctx), name); err != nil {
		s.log.Warn("forgetting a volume", "op", "cluster", "volume", name, "err", err)
	}
}

// relayVolume relays a node's answer of one volume, naming its node.
func (s *Server) relayVolume(w http.ResponseWriter, a nodeAnswer, node string) {
	var v apiv1.Volume
	if a.decode(&v) != nil {
		relay(w, a)
		return
	}
	v.Node = node
	writeJSON(w, a.status, v)
}

// volumeHolder is the ready node that holds volume {name}.
func (s *Server) volumeHolder(ctx context.Context, name string) (store.Node, error) {
	if err := volume.CheckName("name", name); err != nil {
		return store.Node{}, err
	}
	l, err := s.st.VolumeLocation(ctx, name)
	if err != nil {
		return store.Node{}, err
	}
	if err := holderReady(l); err != nil {
		return store.Node{}, err
	}
	return s.st.Node(ctx, l.Node)
}

// holderReady is the error for a volume whose node was lost.
func holderReady(l store.VolumeLocation) error {
	if l.NodeState == store.NodeReady {
		return nil
	}
	return fmt.Errorf("%w: volume %s is on node %s, which is %s: its volume is out of reach until the node is back",
		errdefs.ErrFailedPrecondition, l.Name, l.Node, l.NodeState)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	n, err := s.volumeHolder(r.Context(), name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	a, err := s.callNode(r.Context(), n, http.MethodGet, "/v1/volumes/"+name, nil, "")
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.relayVolume(w, a, n.ID)
}

// deleteVolume removes a volume on its node ([?force=true] passed on; a
// volume in use is the node's 409) and forgets it once the node no
// longer has it.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	n, err := s.volumeHolder(r.Context(), name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	path := "/v1/volumes/" + name
	if q := r.URL.RawQuery; q != "" {
		path += "?" + q
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), volumeCallTimeout)
	defer cancel()
	a, err := s.callNode(ctx, n, http.MethodDelete, path, nil, "")
	if err != nil {
		s.writeError(w, err)
		return
	}
	if a.status == http.StatusNoContent || a.status == http.StatusNotFound {
		s.forgetVolume(ctx, name)
		s.log.InfoContext(r.Context(), "volume removed", "op", "cluster", "volume", name, "node", n.ID, "status", a.status)
	}
	relay(w, a)
}

// proxyVolume passes a volume's file calls (read, write, list) to its
// node as they stream.
func (s *Server) proxyVolume(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	n, err := s.volumeHolder(r.Context(), name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	target, cred, err := s.nodeTarget(n)
	if err != nil {
		s.writeError(w, err)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set(nodeauth.Header, cred)
		},
		Transport:     s.client.Transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			s.writeError(w, fmt.Errorf("%w: volume %s: its node %s does not answer: %v", errdefs.ErrUnavailable, name, n.ID, err))
		},
	}
	fullDuplex(w)
	rp.ServeHTTP(w, r)
}

// listVolumes lists the cluster's volumes (volume_locations), each with
// what its node says of it now (who mounts it, its usage) and its node.
// A volume whose node is lost or does not answer is listed from the
// database alone, and the node is named in X-Corral-Missing-Nodes.
func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	locs, err := s.st.Volumes(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	live := s.nodeVolumes(r.Context(), locs)
	out := apiv1.VolumeList{Volumes: []apiv1.Volume{}}
	var missing []string
	for _, l := range locs {
		vols, ok := live[l.Node]
		if !ok && !slices.Contains(missing, l.Node) {
			missing = append(missing, l.Node)
		}
		v, ok := vols[l.Name]
		if !ok {
			v = apiv1.Volume{Name: l.Name, SizeGiB: l.SizeGiB, CreatedAt: l.Created.UTC(), MountedBy: []string{}}
		}
		v.Node = l.Node
		out.Volumes = append(out.Volumes, v)
	}
	if len(missing) > 0 {
		w.Header().Set(partialHeader, strings.Join(missing, ","))
	}
	writeJSON(w, http.StatusOK, out)
}

// nodeVolumes asks each ready node that holds one of locs for its
// volumes, at once: node → name → volume; a node that did not answer is
// absent.
func (s *Server) nodeVolumes(ctx context.Context, locs []store.VolumeLocation) map[string]map[string]apiv1.Volume {
	var mu sync.Mutex
	out := map[string]map[string]apiv1.Volume{}
	var wg sync.WaitGroup
	asked := map[string]bool{}
	for _, l := range locs {
		if asked[l.Node] || l.NodeState != store.NodeReady {
			continue
		}
		asked[l.Node] = true
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			n, err := s.st.Node(ctx, id)
			if err != nil {
				return
			}
			a, err := s.callNode(ctx, n, http.MethodGet, "/v1/volumes", nil, "")
			var list apiv1.VolumeList
			if err == nil {
				err = a.decode(&list)
			}
			if err != nil {
				s.log.WarnContext(ctx, "a node did not list its volumes", "op", "cluster", "node", id, "err", err)
				return
			}
			m := map[string]apiv1.Volume{}
			for _, v := range list.Volumes {
				m[v.Name] = v
			}
			mu.Lock()
			out[id] = m
			mu.Unlock()
		}(l.Node)
	}
	wg.Wait()
	return out
}

// volumeNode is the node a create that mounts mounts must go to: the one
// that holds them all. An unknown volume is NotFound; volumes on several
// nodes, or on a lost one, are FailedPrecondition naming them.
func (s *Server) volumeNode(ctx context.Context, mounts []apiv1.VolumeMount) (string, error) {
	if len(mounts) == 0 {
		return "", nil
	}
	var names []string
	for _, m := range mounts {
		if !slices.Contains(names, m.Name) {
			names = append(names, m.Name)
		}
	}
	locs, err := s.st.VolumeLocations(ctx, names)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if !slices.ContainsFunc(locs, func(l store.VolumeLocation) bool { return l.Name == n }) {
			return "", fmt.Errorf("%w: volume %s (the cluster knows no such volume)", errdefs.ErrNotFound, n)
		}
	}
	byNode := map[string][]string{}
	for _, l := range locs {
		if err := holderReady(l); err != nil {
			return "", err
		}
		byNode[l.Node] = append(byNode[l.Node], l.Name)
	}
	if len(byNode) > 1 {
		var parts []string
		for node, vs := range byNode {
			parts = append(parts, fmt.Sprintf("%s on node %s", strings.Join(vs, ", "), node))
		}
		slices.Sort(parts)
		return "", fmt.Errorf("%w: a sandbox's volumes must all be on one node, and these are not: %s",
			errdefs.ErrFailedPrecondition, strings.Join(parts, "; "))
	}
	return locs[0].Node, nil
}
