package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/internal/manager"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req apiv1.CreateSandboxRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	spec, err := specOf(req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	sb, err := s.m.Create(r.Context(), spec)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.toAPI(sb))
}

// seconds converts an API duration, refusing NaN, infinities and values
// beyond max before they can overflow.
func seconds(field string, v float64, max time.Duration) (time.Duration, error) {
	if math.IsNaN(v) || v < 0 || v > max.Seconds() {
		return 0, errdefs.Invalid(field, "must be between 0 and %g seconds, got %v", max.Seconds(), v)
	}
	return time.Duration(v * float64(time.Second)), nil
}

func specOf(req apiv1.CreateSandboxRequest) (sandbox.Spec, error) {
	timeout, err := seconds("timeout", req.Timeout, sandbox.MaxTimeout)
	if err != nil {
		return sandbox.Spec{}, err
	}
	idle, err := seconds("idle_timeout", req.IdleTimeout, sandbox.MaxTimeout)
	if err != nil {
		return sandbox.Spec{}, err
	}
	net, err := policyOf(req.NetworkPolicy)
	if err != nil {
		return sandbox.Spec{}, err
	}
	for k := range req.Tags {
		if strings.HasPrefix(k, manager.ReservedTagPrefix) {
			return sandbox.Spec{}, errdefs.Invalid("tags", "%q: keys beginning with %q are the daemon's own", k, manager.ReservedTagPrefix)
		}
	}
	var expose []sandbox.ExposedPort
	for _, p := range req.Expose {
		if p.URL != "" {
			return sandbox.Spec{}, errdefs.Invalid("expose", "url is chosen by the daemon")
		}
		expose = append(expose, sandbox.ExposedPort{Port: p.Port, Public: p.Public})
	}
	return sandbox.Spec{
		Network: net, Expose: expose, Runtime: req.Runtime, Image: req.Image, CPU: req.CPU, CPULimit: req.CPULimit,
		MemoryMB: req.MemoryMB, MemoryLimitMB: req.MemoryLimitMB, DiskMB: req.DiskMB, Timeout: timeout, IdleTimeout: idle,
		Env: req.Env, Workdir: req.Workdir, User: req.User, Name: req.Name, Tags: req.Tags, Entrypoint: req.Entrypoint,
		FromSnapshot: req.FromSnapshot, AutoPause: req.AutoPause, PauseOnTimeout: req.PauseOnTimeout, AutoResume: req.AutoResume,
		PauseFilesystem: req.PauseFilesystem,
		CACerts:         req.CACerts, Volumes: volumesOf(req.Volumes),
		Secrets: req.Secrets, SecretHeaders: headerRulesOf(req.SecretHeaders),
	}, nil
}

func (s *Server) toAPI(sb *sandbox.Sandbox) apiv1.Sandbox {
	out := apiv1.Sandbox{
		ID: sb.ID, Name: sb.Spec.Name, State: string(sb.State), Runtime: sb.Spec.Runtime, Image: sb.Spec.Image,
		CPU: sb.Spec.CPU, CPULimit: sb.Spec.CPULimit, MemoryMB: sb.Spec.MemoryMB, MemoryLimitMB: sb.Spec.MemoryLimitMB, DiskMB: sb.Spec.DiskMB,
		Timeout: sb.Spec.Timeout.Seconds(), IdleTimeout: sb.Spec.IdleTimeout.Seconds(), Env: sb.Spec.Env,
		Workdir: sb.Spec.Workdir, User: sb.Spec.User, Tags: sb.Spec.Tags, Entrypoint: sb.Spec.Entrypoint, CreatedAt: sb.CreatedAt,
		Network: networkOf(sb.Spec.Network), ExitCode: sb.ExitCode, EndReason: sb.EndReason, Error: sb.Error, AgentVersion: sb.AgentVersion,
		RuntimeInfo: sb.RuntimeInfo, FromSnapshot: sb.Spec.FromSnapshot, AutoPause: sb.Spec.AutoPause,
		PauseOnTimeout: sb.Spec.PauseOnTimeout, AutoResume: sb.Spec.AutoResume, Volumes: volumesToAPI(sb.Spec.Volumes),
		PauseFilesystem: sb.Spec.PauseFilesystem, PauseKind: sb.PauseKind,
		Secrets: sb.Spec.Secrets, SecretHeaders: headerRulesToAPI(sb.Spec.SecretHeaders),
	}
	out.Error = s.red.String(sb.Error)
	if !sb.State.Terminal() {
		if addr, gw, ok := s.m.Address(sb.ID); ok {
			out.Address, out.Gateway = addr.String(), gw.String()
		}
	}
	for _, p := range sb.Spec.Expose {
		ep := apiv1.ExposedPort{Port: p.Port, Public: p.Public, URL: fmt.Sprintf("/v1/sandboxes/%s/ports/%d/", sb.ID, p.Port)}
		if s.ports != nil {
			ep.BrowserURL = s.ports.URL(sb.ID, p.Port, "/")
		}
		out.Ports = append(out.Ports, ep)
	}
	if len(out.Ports) > 0 {
		out.PortToken = s.m.PortToken(sb)
	}
	if sb.State == sandbox.Running || sb.State == sandbox.Paused {
		out.EnvdAccessToken = s.m.AccessToken(sb)
	}
	for _, p := range sb.Phases {
		out.CreatePhases = append(out.CreatePhases, apiv1.Phase{Name: p.Name, MS: float64(p.Duration.Microseconds()) / 1000})
	}
	if !sb.StartedAt.IsZero() {
		t := sb.StartedAt
		out.StartedAt = &t
	}
	if !sb.EndedAt.IsZero() {
		t := sb.EndedAt
		out.EndedAt = &t
	} else {
		t := sb.ExpiresAt()
		out.ExpiresAt = &t
	}
	return out
}

// listSandboxes is GET /v1/sandboxes: a page of records, filtered by
// state and tags (listOptions).
func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	o, err := listOptions(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	page, next, err := s.m.ListPage(r.Context(), o)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.SandboxList{Sandboxes: []apiv1.Sandbox{}, Next: next}
	for _, sb := range page {
		out.Sandboxes = append(out.Sandboxes, s.toAPI(sb))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.m.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := s.toAPI(sb)
	if sb.State.Terminal() {
		if u, err := s.m.UsageOf(r.Context(), sb.ID); err == nil {
			au := toAPIUsage(u.Totals)
			out.Usage = &au
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteSandbox terminates a sandbox: by default it answers 200 once
// everything of it is gone from the host; with ?wait=false, 202 as soon as
// it is terminating (the teardown goes on; GET or wait tell the end).
func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	wait := true
	switch v := r.URL.Query().Get("wait"); v {
	case "", "true":
	case "false":
		wait = false
	default:
		s.writeError(w, errdefs.Invalid("wait", "true or false, got %q", v))
		return
	}
	id := r.PathValue("id")
	if !wait {
		sb, err := s.m.TerminateNoWait(r.Context(), id, sandbox.EndTerminated)
		if err != nil {
			s.writeError(w, err)
			return
		}
		status := http.StatusAccepted
		if sb.State.Terminal() {
			status = http.StatusOK
		}
		writeJSON(w, status, s.toAPI(sb))
		return
	}
	sb, err := s.m.Terminate(r.Context(), id, sandbox.EndTerminated, nil)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toAPI(sb))
}

func (s *Server) waitSandbox(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if t := r.URL.Query().Get("timeout"); t != "" {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil {
			s.writeError(w, errdefs.Invalid("timeout", "not a number of seconds: %q", t))
			return
		}
		d, err := seconds("timeout", v, sandbox.MaxTimeout)
		if err != nil {
			s.writeError(w, err)
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	code, reason, err := s.m.Wait(ctx, r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	res := apiv1.WaitResult{ExitCode: code, EndReason: reason}
	if rec, err := s.m.Get(ctx, r.PathValue("id")); err == nil && rec.State.Terminal() {
		res.Error = s.red.String(rec.Error)
	}
	writeJSON(w, http.StatusOK, res)
}

// maxEventsPage bounds a page of a sandbox's events.
const maxEventsPage = 1000

func (s *Server) sandboxEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, limit := int64(0), maxEventsPage
	var err error
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			s.writeError(w, errdefs.Invalid("after", "%q is not an event sequence number", v))
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxEventsPage {
			s.writeError(w, errdefs.Invalid("limit", "%q: want 1 to %d", v, maxEventsPage))
			return
		}
	}
	evs, err := s.m.Events(r.Context(), r.PathValue("id"), after, limit)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.EventList{Events: []apiv1.Event{}}
	for _, e := range evs {
		out.Events = append(out.Events, apiv1.Event{Seq: e.Seq, Time: e.Time, Kind: e.Kind, Message: s.red.String(e.Message), Fields: s.redactFields(e.Fields)})
	}
	if len(evs) == limit {
		out.Next = evs[len(evs)-1].Seq
	}
	writeJSON(w, http.StatusOK, out)
}

// sandboxLogs serves the entrypoint's output; with follow=true it keeps
// streaming until the sandbox is terminal.
func (s *Server) sandboxLogs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	path, err := s.m.LogPath(r.Context(), id)
	if err != nil {
		s.writeError(w, err)
		return
	}
	follow := r.URL.Query().Get("follow") == "true" || r.URL.Query().Get("follow") == "1"
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	var off int64
	done := s.m.Done(id)
	for {
		off += copyFrom(w, path, off)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if !follow {
			return
		}
		select {
		case <-done:
			copyFrom(w, path, off)
			return
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func copyFrom(w io.Writer, path string, off int64) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0
	}
	n, err := io.Copy(w, f)
	if err != nil && !errors.Is(err, io.EOF) {
		return n
	}
	return n
}

// redactFields is an event's fields without host paths (an error's text
// may name a daemon file).
func (s *Server) redactFields(fields map[string]string) map[string]string {
	if len(fields) == 0 {
		return fields
	}
	out := make(map[string]string, len(fields))
	for k, v := range fields {
		out[k] = s.red.String(v)
	}
	return out
}
