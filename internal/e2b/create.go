package e2b

import (
	"context"
	"math"
	"net/http"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// DefaultTimeout is a sandbox's lifetime when create names none (E2B's
// default).
const DefaultTimeout = 15 * time.Second

// clientID is what responses give as E2B's clientID (a field its SDKs
// require and do not use).
const clientID = "corral"

func (s *Server) createV1(w http.ResponseWriter, r *http.Request) { s.create(w, r) }
func (s *Server) createV2(w http.ResponseWriter, r *http.Request) { s.create(w, r) }

// create is POST /sandboxes and /v2/sandboxes: a sandbox of templateID,
// answered once it runs.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req newSandbox
	if err := decode(w, r, &req, false); err != nil {
		s.writeError(w, err)
		return
	}
	spec, err := s.specOf(r.Context(), req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	sb, err := s.m.Create(r.Context(), spec)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.sandboxOut(sb))
}

// specOf validates req and translates it into a spec; what Corral cannot
// honour is a 400 naming the field.
func (s *Server) specOf(ctx context.Context, req newSandbox) (sandbox.Spec, error) {
	if err := refuseUnsupported(req); err != nil {
		return sandbox.Spec{}, err
	}
	timeout, err := seconds("timeout", req.Timeout, DefaultTimeout)
	if err != nil {
		return sandbox.Spec{}, err
	}
	tags, err := tagsOf(req.Metadata)
	if err != nil {
		return sandbox.Spec{}, err
	}
	pauseOnTimeout, autoResume, err := lifecycleOf(req)
	if err != nil {
		return sandbox.Spec{}, err
	}
	net, err := policyOf(req.AllowInternetAccess, req.Network)
	if err != nil {
		return sandbox.Spec{}, err
	}
	tmpl, err := s.tmpl.resolve(ctx, req.TemplateID)
	if err != nil {
		return sandbox.Spec{}, err
	}
	tags[templateTag] = tmpl.ID
	spec := sandbox.Spec{
		Image: tmpl.Image, FromSnapshot: tmpl.FromSnapshot, Timeout: timeout, Env: req.EnvVars, Tags: tags,
		Network: net, PauseOnTimeout: pauseOnTimeout, AutoResume: autoResume,
		PauseFilesystem: pauseOnTimeout && req.AutoPauseMemory != nil && !*req.AutoPauseMemory,
	}
	if tmpl.FromSnapshot == "" {
		spec.Runtime = s.cfg.Runtime
	}
	return spec, nil
}

// refuseUnsupported names the create fields Corral cannot honour.
func refuseUnsupported(req newSandbox) error {
	switch {
	case len(req.MCP) > 0 && string(req.MCP) != "null":
		return errdefs.Invalid("mcp", "Corral does not run E2B's MCP gateway")
	case len(req.IAM) > 0 && string(req.IAM) != "null" && string(req.IAM) != "{}":
		return errdefs.Invalid("iam", "Corral issues no IAM tokens")
	case len(req.VolumeMounts) > 0:
		return errdefs.Invalid("volumeMounts", "Corral has no E2B volumes")
	}
	return nil
}

// seconds is an optional E2B duration in seconds (def when absent).
func seconds(field string, v *float64, def time.Duration) (time.Duration, error) {
	if v == nil {
		return def, nil
	}
	if math.IsNaN(*v) || *v < 0 || *v > sandbox.MaxTimeout.Seconds() {
		return 0, errdefs.Invalid(field, "must be between 0 and %g seconds, got %v", sandbox.MaxTimeout.Seconds(), *v)
	}
	return time.Duration(*v * float64(time.Second)), nil
}

// Bounds of metadata: Corral's tags' (one tag is Corral's own).
const (
	maxMetadata      = 63
	maxMetadataValue = 256
)

// tagsOf turns metadata into tags (always a fresh map), refusing
// Corral's own keys.
func tagsOf(md map[string]string) (map[string]string, error) {
	tags := make(map[string]string, len(md)+1)
	for k, v := range md {
		if strings.HasPrefix(k, sandbox.ReservedTagPrefix) {
			return nil, errdefs.Invalid("metadata", "%q: keys beginning with %q are Corral's own", truncate(k), sandbox.ReservedTagPrefix)
		}
		if !sandbox.ValidTagKey(k) {
			return nil, errdefs.Invalid("metadata", "key %q: Corral's keys are 1 to 63 of letters, digits, '_', '.', '/', '-', beginning with a letter or digit", truncate(k))
		}
		if len(v) > maxMetadataValue || strings.ContainsRune(v, 0) {
			return nil, errdefs.Invalid("metadata", "value of %q: at most %d bytes, no NUL", truncate(k), maxMetadataValue)
		}
		tags[k] = v
	}
	if len(tags) > maxMetadata {
		return nil, errdefs.Invalid("metadata", "at most %d entries, got %d", maxMetadata, len(tags))
	}
	return tags, nil
}

// lifecycleOf reads autoPause / autoResume (and the older lifecycle
// object): pause at the end of the lifetime, and resume on the next call.
func lifecycleOf(req newSandbox) (pause, resume bool, err error) {
	if req.AutoPause != nil {
		pause = *req.AutoPause
	}
	if req.AutoResume != nil {
		resume = req.AutoResume.Enabled
	}
	if l := req.Lifecycle; l != nil {
		switch l.OnTimeout {
		case "", "kill":
		case "pause":
			pause = true
		default:
			return false, false, errdefs.Invalid("lifecycle.onTimeout", "must be kill or pause, got %q", truncate(l.OnTimeout))
		}
		if l.AutoResume != nil {
			resume = resume || *l.AutoResume
		}
	}
	if resume && !pause {
		return false, false, errdefs.Invalid("autoResume", "needs autoPause (onTimeout: pause)")
	}
	if m := req.AutoPauseMemory; m != nil && !*m {
		switch {
		case !pause:
			return false, false, errdefs.Invalid("autoPauseMemory", "false needs autoPause (onTimeout: pause)")
		case resume:
			return false, false, errdefs.Invalid("autoPauseMemory", "false cannot go with autoResume: a filesystem-only pause boots the sandbox afresh, so only connect resumes it")
		}
	}
	return pause, resume, nil
}
