package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	imagestore "corral/internal/image/store"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
)

// Export writes what a sandbox changed in its root filesystem as an OCI
// layer tar.
type Export func(w io.Writer) (runtime.ExportStats, error)

// CommitFS stores what export writes as one more layer on the image of a
// sandbox of spec (the base as a layer, for the base) and returns the
// untagged image: how a filesystem-only pause keeps a sandbox's files.
// The image builder has it (build.Builder.CommitFS).
type CommitFS func(ctx context.Context, spec sandbox.Spec, export Export) (imagestore.Image, error)

// PauseOptions say how to pause.
type PauseOptions struct {
	// Filesystem keeps only the root filesystem (sandbox.PauseFilesystem):
	// nothing of memory is saved, and resuming boots the sandbox afresh.
	Filesystem bool
}

// PauseWith pauses a running sandbox as o says: Pause, or a
// filesystem-only pause.
func (m *Manager) PauseWith(ctx context.Context, id string, o PauseOptions) (*sandbox.Sandbox, error) {
	if !o.Filesystem {
		return m.Pause(ctx, id)
	}
	return m.pauseFilesystem(ctx, id)
}

// pauseFilesystem saves a running sandbox's root filesystem as an image
// (its FSImage, which its spec's image names from now on) and stops it:
// its processes, memory and connections end, and everything of its host
// resources but its runtime stays (id, network slot and policy, exposed
// ports, image lease, record). The sandbox is paused only once the image
// is stored; an export that fails leaves it running.
func (m *Manager) pauseFilesystem(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	h, err := m.live(ctx, id)
	if err != nil {
		return nil, err
	}
	ex, ok := h.Runtime().(runtime.ChangeExporter)
	if !ok {
		return nil, fmt.Errorf("%w: runtime %s cannot save a sandbox's filesystem", errdefs.ErrNotSupported, h.Runtime().Name())
	}
	commit := m.cfg.CommitFS
	if commit == nil || m.cfg.Images == nil {
		return nil, fmt.Errorf("%w: this daemon has no image store to keep a filesystem-only pause in", errdefs.ErrNotSupported)
	}
	if err := refuseWithVolumes(h.Record(), "paused"); err != nil {
		return nil, err
	}
	h.Lock()
	defer h.Unlock()
	rec, client := h.Record(), h.Agent()
	if rec.State != sandbox.Running || client == nil {
		return nil, fmt.Errorf("%w: sandbox %s is %s, not running", errdefs.ErrFailedPrecondition, id, rec.State)
	}
	start := time.Now()
	img, err := commit(ctx, rec.Spec, func(w io.Writer) (runtime.ExportStats, error) {
		return m.exportLocked(ctx, h, ex, client, w)
	})
	if err != nil {
		return nil, fmt.Errorf("saving sandbox %s's filesystem: %w", id, err)
	}
	return m.stopOnImage(ctx, h, img, time.Since(start))
}

// stopOnImage is the rest of a filesystem-only pause once img holds the
// sandbox's files: the record says paused on img, the lease moves to it,
// and the runtime stops. A lease or a stop that fails is done again by
// the resume (prepareImage, resumeFilesystem) or the teardown.
func (m *Manager) stopOnImage(ctx context.Context, h *handle.Handle, img imagestore.Image, took time.Duration) (*sandbox.Sandbox, error) {
	id, prev, digest := h.ID(), h.Record().FSImage, string(img.Digest)
	rec, err := h.Apply(ctx, handle.Change{To: sandbox.Paused, Edit: func(s *sandbox.Sandbox) {
		s.PausedAt, s.PauseKind, s.FSImage = time.Now().UTC(), sandbox.PauseFilesystem, digest
		s.Spec.Image, s.Spec.ImageDigest = digest, digest
	}})
	if err != nil {
		m.dropFSImage(digest)
		return nil, err
	}
	if err := m.cfg.Images.MoveLease(id, img.Digest); err != nil {
		m.log.WarnContext(ctx, "leasing a paused sandbox's filesystem image; the resume leases it again", "sandbox", id, "err", err)
	}
	m.letGo(ctx, h)
	if err := h.Runtime().Destroy(context.WithoutCancel(ctx), h.Ref()); err != nil {
		m.log.WarnContext(ctx, "stopping a sandbox paused to its filesystem; the resume stops it again", "sandbox", id, "err", err)
	}
	if prev != "" && prev != digest {
		m.dropFSImage(prev)
	}
	h.Milestone("paused", "sandbox paused, filesystem only", map[string]string{
		"kind": sandbox.PauseFilesystem, "image": digest, "took": took.Round(time.Millisecond).String()})
	return rec, nil
}

// dropFSImage removes a filesystem-only pause's image the sandbox no
// longer runs on, unless a tag names it or something else leases it (a
// memory snapshot of the sandbox, taken since).
func (m *Manager) dropFSImage(digest string) {
	if m.cfg.Images == nil || digest == "" {
		return
	}
	img, err := m.cfg.Images.Resolve(digest)
	if err != nil || len(img.Tags) > 0 {
		return
	}
	if err := m.cfg.Images.RemoveImage(digest); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("removing a filesystem-only pause's image", "image", digest, "err", err)
	}
}

// resumeFilesystem boots a sandbox paused to its filesystem afresh on its
// image, under its id, in its network slot, with its CA certificates and
// entrypoint, and moves it to running. A boot that fails leaves it
// paused, its runtime stopped, for another try. The caller holds h's
// lock.
func (m *Manager) resumeFilesystem(ctx context.Context, h *handle.Handle) (*sandbox.Sandbox, error) {
	rec := h.Record()
	params := runtime.StartParams{
		Ref: h.Ref(), AgentBinary: m.cfg.AgentBinary, Resources: resourcesOf(rec.Spec), Hostname: rec.ID,
	}
	if m.cfg.Images != nil && rec.FSImage != "" { // the pause may have failed to
		if err := m.cfg.Images.MoveLease(h.ID(), imagestore.Digest(rec.FSImage)); err != nil {
			return nil, err
		}
	}
	if err := m.prepareImage(h, &params); err != nil {
		return nil, err
	}
	if m.networkEnabled() {
		slot, ok := m.cfg.Network.Layer.Slot(h.ID())
		if !ok {
			return nil, fmt.Errorf("sandbox %s has no network slot to boot in", h.ID())
		}
		if err := m.cfg.Network.Layer.Readdress(h.ID()); err != nil {
			return nil, err
		}
		params.NetnsPath, params.Nameservers = slot.NetnsPath, []string{slot.Gateway.String()}
	}
	rt := h.Runtime()
	if err := rt.Destroy(ctx, h.Ref()); err != nil { // what a failed stop or boot left
		return nil, fmt.Errorf("resuming sandbox %s: clearing its previous run: %w", h.ID(), err)
	}
	client, err := m.boot(ctx, h, params)
	if err != nil {
		if derr := rt.Destroy(context.WithoutCancel(ctx), h.Ref()); derr != nil {
			m.log.WarnContext(ctx, "stopping a sandbox whose resume failed", "sandbox", h.ID(), "err", derr)
		}
		return nil, fmt.Errorf("resuming sandbox %s: %w", h.ID(), err)
	}
	m.meterResumed(h, true)
	return m.resumedLocked(ctx, h, client, true)
}

// boot starts the runtime for params and readies the new guest as a
// create does (agent, CA certificates, entrypoint); it returns the
// agent's connection.
func (m *Manager) boot(ctx context.Context, h *handle.Handle, params runtime.StartParams) (*agentapi.Client, error) {
	if err := h.Runtime().Start(ctx, params); err != nil {
		return nil, fmt.Errorf("starting runtime %s: %w", h.Runtime().Name(), err)
	}
	client, err := h.Connect(ctx)
	if err != nil {
		return nil, err
	}
	rec := h.Record()
	own, err := m.secretCAPEMs(rec)
	if err == nil {
		err = installCAs(ctx, client, append(m.sandboxCAs(rec.Spec), own...))
	}
	if err == nil && len(rec.Spec.Entrypoint) > 0 {
		err = m.startEntrypoint(ctx, h, client)
	}
	if err != nil {
		client.Close()
		return nil, err
	}
	return client, nil
}
