package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	"corral/internal/cluster/nodeauth"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/internal/reqid"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// maxCreateBody bounds a create's body (a spec with its env and files
// list, not files).
const maxCreateBody = 1 << 20

// createTries is how many nodes a create tries before it gives up.
const createTries = 3

// createTimeout bounds the wait for a node's answer to a create (a vm
// sandbox under TCG, an image pulled first).
const createTimeout = 10 * time.Minute

// selectorField is the control plane's own field of a create: the labels
// the node must carry. It is taken out before the body goes to the node.
const selectorField = "node_selector"

// create places a sandbox of the native API (place).
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	body, req, spec, err := s.readCreate(w, r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	c := createCall{req: req, name: spec.Name, image: req.Image, path: "/v1/sandboxes", body: body, idOf: nativeID}
	// A sandbox that mounts volumes goes to the node that holds them.
	if c.req.Node, err = s.volumeNode(r.Context(), spec.Volumes); err != nil {
		s.writeError(w, err)
		return
	}
	if spec.FromSnapshot != "" {
		if c.locs, err = s.fromSnapshot(r.Context(), spec.FromSnapshot, &c.req); err != nil {
			s.writeError(w, err)
			return
		}
		// A restore takes no image or warm sandbox: no bonus.
		c.req.Image, c.req.Warm, c.image = "", "", ""
	}
	a, err := s.place(r, c)
	if err != nil {
		s.writeError(w, err)
		return
	}
	relay(w, a)
}

// nativeID reads a native create's answer.
func nativeID(body []byte) (id, name string) {
	var sb apiv1.Sandbox
	_ = json.Unmarshal(body, &sb)
	return sb.ID, sb.Name
}

// createCall is one create to place: what to reserve, what the node must
// hold first, and the node's endpoint and body that carry it out (each
// face's create is translated by that face on the node, so the node's
// face stays the one source of truth).
type createCall struct {
	req   store.Request
	name  string                   // "" for none
	locs  []store.SnapshotLocation // where the snapshot it starts from is
	image string                   // the image the node must hold ("": none)
	path  string
	body  []byte
	// idOf reads the created sandbox's id and name from the node's 201.
	idOf func([]byte) (id, name string)
}

// place places a create: it reserves room on a node (store.Reserve),
// brings the snapshot or image there, forwards the create and binds the
// reservation to the sandbox's id. A node that cannot be reached or is
// full is left for another. The answer is the node's, to relay (its
// refusal of a bad spec included).
func (s *Server) place(r *http.Request, c createCall) (a nodeAnswer, err error) {
	defer func(start time.Time) { s.met.createDone(start, err) }(time.Now())
	if c.name != "" {
		// Checked again, atomically, when the placement is bound.
		if taken, err := s.st.NameTaken(r.Context(), c.name); err != nil || taken {
			if err == nil {
				err = fmt.Errorf("%w: a sandbox named %q already runs in the cluster", errdefs.ErrAlreadyExists, c.name)
			}
			return nodeAnswer{}, err
		}
	}
	req := c.req
	var tried []string
	var last error
	for range createTries {
		req.Exclude = tried
		p, err := s.st.Reserve(r.Context(), req)
		if err != nil {
			if last != nil && errors.Is(err, errdefs.ErrResourceExhausted) {
				break // no other node: say why the tried ones failed
			}
			return nodeAnswer{}, err
		}
		tried = append(tried, p.Node.ID)
		if c.locs != nil {
			if err := s.ensureSnapshot(context.WithoutCancel(r.Context()), p.Node, c.locs); err != nil {
				s.release(r.Context(), p)
				last = err
				s.met.retried.Inc()
				s.log.WarnContext(r.Context(), "a node could not get the snapshot; trying another", "op", "cluster", "node", p.Node.ID, "err", err)
				continue
			}
		}
		if err := s.ensureImage(r.Context(), p.Node, c.image); err != nil {
			s.release(r.Context(), p)
			last = err
			s.met.retried.Inc()
			s.log.WarnContext(r.Context(), "a node could not get a create's image; trying another", "op", "cluster", "node", p.Node.ID, "err", err)
			continue
		}
		resp, err := s.forwardCreate(r, p.Node, c.path, c.body)
		if err != nil {
			s.release(r.Context(), p)
			last = err
			s.met.retried.Inc()
			s.log.WarnContext(r.Context(), "a node failed a create; trying another", "op", "cluster", "node", p.Node.ID, "err", err)
			continue
		}
		if resp.status == http.StatusTooManyRequests || resp.status == http.StatusServiceUnavailable {
			s.release(r.Context(), p)
			last = fmt.Errorf("node %s refused it (%d): %s", p.Node.ID, resp.status, bytes.TrimSpace(resp.body))
			s.met.retried.Inc()
			s.log.InfoContext(r.Context(), "a node refused a create; trying another", "op", "cluster", "node", p.Node.ID, "status", resp.status)
			continue
		}
		return s.bind(r, p, resp, c.idOf)
	}
	if errors.Is(last, errdefs.ErrFailedPrecondition) {
		// A snapshot no node tried can restore (another runtime
		// version): said as the node said it.
		return nodeAnswer{}, fmt.Errorf("creating a sandbox: the nodes tried (%v) cannot restore it: %w", tried, last)
	}
	return nodeAnswer{}, fmt.Errorf("%w: creating a sandbox: the nodes tried (%v) failed or refused it; the last: %v", errdefs.ErrUnavailable, tried, last)
}

// readCreate reads a create's body: the body for the node (without the
// selector), what to reserve and the sandbox's name. The node validates the spec itself;
// this reads only what placement needs.
func (s *Server) readCreate(w http.ResponseWriter, r *http.Request) ([]byte, store.Request, apiv1.CreateSandboxRequest, error) {
	var spec apiv1.CreateSandboxRequest
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCreateBody))
	if err != nil {
		return nil, store.Request{}, spec, fmt.Errorf("%w: body: %v", errdefs.ErrInvalidArgument, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, store.Request{}, spec, fmt.Errorf("%w: body: want a JSON object", errdefs.ErrInvalidArgument)
	}
	var labels map[string]string
	if sel, ok := fields[selectorField]; ok {
		if err := json.Unmarshal(sel, &labels); err != nil {
			return nil, store.Request{}, spec, errdefs.Invalid(selectorField, "want an object of string labels")
		}
		for k, v := range labels {
			if k == "" || len(k) > 63 || len(v) > 63 {
				return nil, store.Request{}, spec, errdefs.Invalid(selectorField, "label %q: a key of 1 to 63 bytes and a value of at most 63", k)
			}
		}
		delete(fields, selectorField)
		if raw, err = json.Marshal(fields); err != nil {
			return nil, store.Request{}, spec, err
		}
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, store.Request{}, spec, fmt.Errorf("%w: body: %v", errdefs.ErrInvalidArgument, err)
	}
	req := store.Request{Runtime: spec.Runtime, CPUMilli: milli(spec.CPU, sandbox.DefaultCPU), MemoryMB: orDefault(spec.MemoryMB, sandbox.DefaultMemoryMB),
		DiskMB: orDefault(spec.DiskMB, sandbox.DefaultDiskMB), Labels: labels, FreshWithin: s.cfg.LostAfter}
	if req.Runtime == "" {
		req.Runtime = sandbox.Runtimes[0]
	}
	if !slices.Contains(sandbox.Runtimes, req.Runtime) {
		return nil, store.Request{}, spec, errdefs.Invalid("runtime", "want one of %v, got %q", sandbox.Runtimes, req.Runtime)
	}
	// Nodes that hold the image, or have a warm sandbox for it, first.
	image := spec.Image
	if image == "" {
		image = "base"
	}
	req.Warm = store.WarmKey(req.Runtime, image)
	if image != "base" {
		req.Image = clusterRef(image)
	}
	return raw, req, spec, nil
}

func milli(cpu, def float64) int64 {
	if cpu <= 0 || math.IsNaN(cpu) || cpu > 1e6 {
		cpu = def
	}
	return int64(math.Ceil(cpu * 1000))
}

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// nodeAnswer is a node's answer to a create, read whole (a sandbox's
// record or an error body).
type nodeAnswer struct {
	status      int
	contentType string
	body        []byte
}

// forwardCreate sends the create to node n; an error means the node did
// not answer.
func (s *Server) forwardCreate(r *http.Request, n store.Node, path string, body []byte) (nodeAnswer, error) {
	target, cred, err := s.nodeTarget(n)
	if err != nil {
		return nodeAnswer{}, err
	}
	// A caller that leaves does not leave the sandbox unrecorded on its
	// node: the answer is awaited and bound all the same.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), createTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.JoinPath(path).String(), bytes.NewReader(body))
	if err != nil {
		return nodeAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(nodeauth.Header, cred)
	if id := reqid.FromContext(r.Context()); id != "" {
		req.Header.Set(reqid.Header, id)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nodeAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nodeAnswer{}, err
	}
	return nodeAnswer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}, nil
}

// bind binds the reservation to the created sandbox; a failed create
// gives the room back. The node's answer is to be relayed.
func (s *Server) bind(r *http.Request, p store.Placement, a nodeAnswer, idOf func([]byte) (string, string)) (nodeAnswer, error) {
	if a.status != http.StatusCreated {
		s.release(r.Context(), p)
		return a, nil
	}
	id, name := idOf(a.body)
	if id == "" {
		s.release(r.Context(), p)
		return nodeAnswer{}, fmt.Errorf("%w: node %s answered a create with no sandbox id", errdefs.ErrUnavailable, p.Node.ID)
	}
	ctx := context.WithoutCancel(r.Context())
	if err := s.st.Bind(ctx, p.ID, id, name); err != nil {
		// Its node was lost meanwhile, or another create took the
		// name: what the node made goes, and its room.
		s.release(ctx, p)
		s.removeOnNode(ctx, p.Node, id)
		return nodeAnswer{}, err
	}
	return a, nil
}

func relay(w http.ResponseWriter, a nodeAnswer) {
	if a.contentType != "" {
		w.Header().Set("Content-Type", a.contentType)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

func (s *Server) release(ctx context.Context, p store.Placement) {
	if err := s.st.Release(context.WithoutCancel(ctx), p.ID); err != nil {
		s.log.Warn("releasing a reservation", "op", "cluster", "reservation", p.ID, "err", err)
	}
}

// removeOnNode terminates sandbox id on node n, best effort.
func (s *Server) removeOnNode(ctx context.Context, n store.Node, id string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	target, cred, err := s.nodeTarget(n)
	if err == nil {
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, http.MethodDelete, target.JoinPath("/v1/sandboxes", id).String()+"?wait=false", nil)
		if err == nil {
			req.Header.Set(nodeauth.Header, cred)
			var resp *http.Response
			if resp, err = s.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("removing a sandbox whose placement failed", "op", "cluster", "sandbox", id, "node", n.ID, "err", err)
	}
}
