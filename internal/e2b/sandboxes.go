package e2b

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
)

// liveSandbox is the record of the running or paused sandbox the path
// names; an unknown or ended one is a 404 naming it, as E2B answers.
func (s *Server) liveSandbox(r *http.Request) (*sandbox.Sandbox, error) {
	id := r.PathValue("id")
	sb, err := s.m.Get(r.Context(), id)
	if errors.Is(err, errdefs.ErrNotFound) || err == nil && sb.State.Terminal() {
		return nil, fmt.Errorf("%w: sandbox %q not found", errdefs.ErrNotFound, truncate(id))
	}
	return sb, err
}

// stateOf is a live sandbox's state as E2B names it.
func stateOf(st sandbox.State) string {
	if st == sandbox.Paused {
		return "paused"
	}
	return "running"
}

func (s *Server) domain() *string {
	if s.cfg.Domain == "" {
		return nil
	}
	d := s.cfg.Domain
	return &d
}

// sandboxOut is what create, connect and resume answer.
func (s *Server) sandboxOut(sb *sandbox.Sandbox) sandboxOut {
	return sandboxOut{SandboxID: sb.ID, TemplateID: templateOf(sb), ClientID: clientID, Alias: sb.Spec.Name,
		EnvdVersion: EnvdVersion, EnvdAccessToken: s.m.AccessToken(sb), Domain: s.domain()}
}

// listed is a sandbox as a list shows it; its metadata is its tags but
// Corral's own.
func listed(sb *sandbox.Sandbox) listedSandbox {
	md := map[string]string{}
	for k, v := range sb.Spec.Tags {
		if !isReserved(k) {
			md[k] = v
		}
	}
	started := sb.StartedAt
	if started.IsZero() {
		started = sb.CreatedAt
	}
	return listedSandbox{
		SandboxID: sb.ID, TemplateID: templateOf(sb), ClientID: clientID, Alias: sb.Spec.Name,
		CPUCount: int(math.Ceil(sb.Spec.CPU)), MemoryMB: sb.Spec.MemoryMB, DiskSizeMB: sb.Spec.DiskMB,
		EnvdVersion: EnvdVersion, Metadata: md, State: stateOf(sb.State),
		StartedAt: started.UTC().Format(time.RFC3339Nano), EndAt: sb.ExpiresAt().UTC().Format(time.RFC3339Nano),
	}
}

func isReserved(k string) bool {
	return len(k) >= len(sandbox.ReservedTagPrefix) && k[:len(sandbox.ReservedTagPrefix)] == sandbox.ReservedTagPrefix
}

// info is GET /sandboxes/{id}.
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	sb, err := s.liveSandbox(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	d := sandboxDetail{listedSandbox: listed(sb), Domain: s.domain(), EnvdAccessToken: s.m.AccessToken(sb)}
	d.AllowInternetAccess, d.Network = networkOut(sb.Spec.Network)
	d.Lifecycle = lifecycleOut{AutoResume: sb.Spec.AutoResume, OnTimeout: "kill"}
	if sb.Spec.PauseOnTimeout {
		d.Lifecycle.OnTimeout = "pause"
	}
	writeJSON(w, http.StatusOK, d)
}

// kill is DELETE /sandboxes/{id}: 204 once it is gone.
func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	if _, err := s.liveSandbox(r); err != nil {
		s.writeError(w, err)
		return
	}
	if _, err := s.m.Terminate(r.Context(), r.PathValue("id"), sandbox.EndTerminated, nil); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setTimeout is POST /sandboxes/{id}/timeout: the lifetime ends timeout
// seconds from now, earlier or later than it would have.
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	var req timeoutRequest
	if err := decode(w, r, &req, false); err != nil {
		s.writeError(w, err)
		return
	}
	if req.Timeout == nil {
		s.writeError(w, errdefs.Invalid("timeout", "is required (seconds)"))
		return
	}
	d, err := seconds("timeout", req.Timeout, 0)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if _, err := s.liveSandbox(r); err != nil {
		s.writeError(w, err)
		return
	}
	if _, err := s.m.Update(r.Context(), r.PathValue("id"), manager.Update{Timeout: &d}); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) connectV1(w http.ResponseWriter, r *http.Request) { s.connect(w, r, true) }
func (s *Server) connectV2(w http.ResponseWriter, r *http.Request) { s.connect(w, r, false) }

// connect resumes a paused sandbox and makes its lifetime end no sooner
// than timeout from now (never shortening it): 200 when it was running,
// 201 when it was resumed.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, v1 bool) {
	var req connectRequest
	if err := decode(w, r, &req, !v1); err != nil {
		s.writeError(w, err)
		return
	}
	if v1 && req.Timeout == nil {
		s.writeError(w, errdefs.Invalid("timeout", "is required (seconds)"))
		return
	}
	d, err := seconds("timeout", req.Timeout, DefaultTimeout)
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.resumeWith(w, r, &d, true, false, req.Memory != nil && !*req.Memory)
}

// resume is v1's POST /sandboxes/{id}/resume: 201 with the sandbox, 409
// when it is not paused.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	var req resumeRequest
	if err := decode(w, r, &req, true); err != nil {
		s.writeError(w, err)
		return
	}
	d, err := seconds("timeout", req.Timeout, DefaultTimeout)
	if err != nil {
		s.writeError(w, err)
		return
	}
	sb, err := s.liveSandbox(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if req.AutoPause != nil && *req.AutoPause != sb.Spec.PauseOnTimeout {
		s.writeError(w, errdefs.Invalid("autoPause", "cannot be changed on resume (it is %t)", sb.Spec.PauseOnTimeout))
		return
	}
	s.resumeWith(w, r, &d, false, true, req.Memory != nil && !*req.Memory)
}

// resumeWith gives the sandbox a lifetime of at least (extendOnly) or
// exactly d from now, then resumes it if it is paused. With mustBePaused
// a running sandbox is a 409; with reboot (memory: false) one paused with
// its memory is a 400, since only a filesystem-only pause resumes by
// booting afresh.
func (s *Server) resumeWith(w http.ResponseWriter, r *http.Request, d *time.Duration, extendOnly, mustBePaused, reboot bool) {
	sb, err := s.liveSandbox(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	id := sb.ID
	if mustBePaused && sb.State != sandbox.Paused {
		s.writeError(w, fmt.Errorf("%w: sandbox %s is %s, not paused", errdefs.ErrFailedPrecondition, id, sb.State))
		return
	}
	if reboot && sb.State == sandbox.Paused && sb.PauseKind != sandbox.PauseFilesystem {
		s.writeError(w, errdefs.Invalid("memory", "false (resume by rebooting) is only how a sandbox paused with keepMemory: false resumes; this one kept its memory, and resumes with it"))
		return
	}
	// The lifetime first: for a paused sandbox it counts from the resume,
	// and a sandbox resumed with no time left would end at once.
	if _, err := s.m.Update(r.Context(), id, manager.Update{Timeout: d, ExtendOnly: extendOnly}); err != nil {
		s.writeError(w, err)
		return
	}
	status := http.StatusOK
	if sb.State == sandbox.Paused {
		if _, err := s.m.Resume(r.Context(), id); err != nil && !errors.Is(err, errdefs.ErrFailedPrecondition) {
			s.writeError(w, err)
			return
		}
		status = http.StatusCreated
	}
	if sb, err = s.m.Get(r.Context(), id); err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, status, s.sandboxOut(sb))
}

// pause is POST /sandboxes/{id}/pause: 204 once paused, memory kept, or
// only the filesystem (memory: false, the SDK's keepMemory: false); 409
// when it already is.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	var req pauseRequest
	if err := decode(w, r, &req, true); err != nil {
		s.writeError(w, err)
		return
	}
	sb, err := s.liveSandbox(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if sb.State == sandbox.Paused {
		s.writeError(w, fmt.Errorf("%w: sandbox %s is already paused", errdefs.ErrFailedPrecondition, sb.ID))
		return
	}
	o := manager.PauseOptions{Filesystem: req.Memory != nil && !*req.Memory}
	if _, err := s.m.PauseWith(r.Context(), sb.ID, o); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
