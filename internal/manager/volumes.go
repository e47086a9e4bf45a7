package manager

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/manager/handle"
	"corral/internal/runtime"
	"corral/internal/sandbox"
	"corral/internal/volume"
)

// Volumes: the manager is what knows which live sandboxes mount a volume
// (their specs, in the handles index, which reconcile rebuilds after a
// restart), so every volume call that depends on it goes through here.
// Rules: every mount of a volume is served from the host's mount of its
// image, which any number of sandboxes (either runtime) and the host-side
// file calls share: a gvisor sandbox binds it through the gofer, a vm
// guest mounts it over NFS relayed by its agent (volumes_nfs.go).

// VolumeInfo is a volume with what uses it now.
type VolumeInfo struct {
	volume.Volume
	// MountedBy are the live sandboxes that mount it, by id.
	MountedBy []string
	// UsedBytes and SizeBytes are its file system's, when the host has it
	// mounted (Usage false otherwise).
	UsedBytes, SizeBytes int64
	Usage                bool
}

// volumeHolder is a live sandbox's mount of a volume.
type volumeHolder struct {
	id string
}

// volumes returns the store, or ErrNotSupported when this manager has
// none.
func (m *Manager) volumes() (*volume.Store, error) {
	if m.cfg.Volumes == nil {
		return nil, fmt.Errorf("%w: this daemon has no volume store", errdefs.ErrNotSupported)
	}
	return m.cfg.Volumes, nil
}

// holdersLocked lists the live sandboxes that mount volume name. The
// caller holds m.mu.
func (m *Manager) holdersLocked(name string) []volumeHolder {
	var out []volumeHolder
	for id, h := range m.handles {
		rec := h.Record()
		if rec.State.Terminal() {
			continue
		}
		for _, v := range rec.Spec.Volumes {
			if v.Name == name {
				out = append(out, volumeHolder{id: id})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (m *Manager) holders(name string) []volumeHolder {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holdersLocked(name)
}

// checkVolumes refuses, before anything is started, a spec naming a
// volume that does not exist or asking what a volume cannot do.
func (m *Manager) checkVolumes(spec sandbox.Spec) error {
	if len(spec.Volumes) == 0 {
		return nil
	}
	st, err := m.volumes()
	if err != nil {
		return err
	}
	if spec.FromSnapshot != "" || spec.AutoPause || spec.PauseOnTimeout {
		return errdefs.Invalid("volumes", "a sandbox with volumes cannot be paused or restored from a memory snapshot (from_snapshot, auto_pause, pause_on_timeout)")
	}
	for _, v := range spec.Volumes {
		if _, err := st.Get(v.Name); err != nil {
			return err
		}
	}
	return nil
}

// mountVolumes readies the spec's volumes for the runtime: the host
// mount, which gvisor binds and vm serves over NFS once its agent answers
// (mountVolumesNFS).
func (m *Manager) mountVolumes(ctx context.Context, spec sandbox.Spec, params *runtime.StartParams) error {
	if len(spec.Volumes) == 0 {
		return nil
	}
	st, err := m.volumes()
	if err != nil {
		return err
	}
	for _, v := range spec.Volumes {
		rv := runtime.Volume{Name: v.Name, GuestPath: v.Path, ReadOnly: v.ReadOnly}
		unlock := st.Lock(v.Name)
		rv.HostDir, err = st.HostDir(ctx, v.Name)
		unlock()
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
		params.Volumes = append(params.Volumes, rv)
	}
	return nil
}

// volumeEvents records a volume_mounted event per volume of a started
// sandbox.
func volumeEvents(h *handle.Handle, spec sandbox.Spec) {
	for _, v := range spec.Volumes {
		h.Event("volume_mounted", "volume "+v.Name+" mounted at "+v.Path,
			map[string]string{"volume": v.Name, "path": v.Path, "read_only": fmt.Sprint(v.ReadOnly)})
	}
}

// refuseWithVolumes is the error of a pause, memory snapshot or fork of a
// sandbox with volumes: a saved sandbox would hold open files of a volume
// that lives on without it.
func refuseWithVolumes(rec *sandbox.Sandbox, what string) error {
	if len(rec.Spec.Volumes) == 0 {
		return nil
	}
	names := make([]string, len(rec.Spec.Volumes))
	for i, v := range rec.Spec.Volumes {
		names[i] = v.Name
	}
	return fmt.Errorf("%w: sandbox %s mounts volume %s: a sandbox with volumes cannot be %s", errdefs.ErrFailedPrecondition,
		rec.ID, strings.Join(names, ", "), what)
}

// CreateVolume makes a volume of sizeGiB (0: the default).
func (m *Manager) CreateVolume(ctx context.Context, name string, sizeGiB int64) (VolumeInfo, error) {
	st, err := m.volumes()
	if err != nil {
		return VolumeInfo{}, err
	}
	v, err := st.Create(ctx, name, sizeGiB)
	if err != nil {
		return VolumeInfo{}, err
	}
	return VolumeInfo{Volume: v}, nil
}

// GetVolume returns volume name with its holders and, when the host can
// have it mounted, its usage.
func (m *Manager) GetVolume(ctx context.Context, name string) (VolumeInfo, error) {
	st, err := m.volumes()
	if err != nil {
		return VolumeInfo{}, err
	}
	v, err := st.Get(name)
	if err != nil {
		return VolumeInfo{}, err
	}
	return m.volumeInfo(ctx, st, v), nil
}

func (m *Manager) volumeInfo(ctx context.Context, st *volume.Store, v volume.Volume) VolumeInfo {
	info := VolumeInfo{Volume: v}
	unlock := st.Lock(v.Name)
	defer unlock()
	for _, h := range m.holders(v.Name) {
		info.MountedBy = append(info.MountedBy, h.id)
	}
	if _, err := st.HostDir(ctx, v.Name); err != nil {
		m.log.Warn("mounting a volume on the host", "volume", v.Name, "err", err)
	}
	info.UsedBytes, info.SizeBytes, info.Usage = st.Usage(v.Name)
	return info
}

// ListVolumes returns every volume.
func (m *Manager) ListVolumes(ctx context.Context) ([]VolumeInfo, error) {
	st, err := m.volumes()
	if err != nil {
		return nil, err
	}
	vols, err := st.List()
	if err != nil {
		return nil, err
	}
	out := make([]VolumeInfo, 0, len(vols))
	for _, v := range vols {
		out = append(out, m.volumeInfo(ctx, st, v))
	}
	return out, nil
}

// RemoveVolume deletes volume name and its data. While live sandboxes
// mount it the removal is refused (naming them), unless force: then they
// are terminated first (a mount cannot be taken from a running sandbox).
func (m *Manager) RemoveVolume(ctx context.Context, name string, force bool) error {
	st, err := m.volumes()
	if err != nil {
		return err
	}
	if _, err := st.Get(name); err != nil {
		return err
	}
	if hs := m.holders(name); len(hs) > 0 {
		if !force {
			ids := make([]string, len(hs))
			for i, h := range hs {
				ids[i] = h.id
			}
			return fmt.Errorf("%w: volume %q is mounted by sandbox %s (remove them first, or force)", errdefs.ErrFailedPrecondition, name, strings.Join(ids, ", "))
		}
		for _, h := range hs {
			if _, err := m.Terminate(ctx, h.id, sandbox.EndTerminated, nil); err != nil {
				return fmt.Errorf("removing volume %q: terminating sandbox %s: %w", name, h.id, err)
			}
		}
	}
	unlock := st.Lock(name)
	defer unlock()
	// A create may have admitted a sandbox on it meanwhile.
	if hs := m.holders(name); len(hs) > 0 {
		return fmt.Errorf("%w: volume %q is mounted by sandbox %s", errdefs.ErrFailedPrecondition, name, hs[0].id)
	}
	return st.Remove(ctx, name)
}

// volumeHostDir returns the host mount of volume name for a host-side
// file call. The caller holds st.Lock(name).
func (m *Manager) volumeHostDir(ctx context.Context, st *volume.Store, name string) (string, error) {
	return st.HostDir(ctx, name)
}

// OpenVolumeFile opens file path of volume name for reading from the
// host side.
func (m *Manager) OpenVolumeFile(ctx context.Context, name, path string) (*os.File, fs.FileInfo, error) {
	st, err := m.volumes()
	if err != nil {
		return nil, nil, err
	}
	unlock := st.Lock(name)
	defer unlock()
	root, err := m.volumeHostDir(ctx, st, name)
	if err != nil {
		return nil, nil, err
	}
	return volume.OpenFile(root, path)
}

// WriteVolumeFile writes r to file path of volume name from the host
// side. The volume stays locked while it is written (no vm takes it).
func (m *Manager) WriteVolumeFile(ctx context.Context, name, path string, r io.Reader, mode fs.FileMode) (volume.Entry, error) {
	st, err := m.volumes()
	if err != nil {
		return volume.Entry{}, err
	}
	unlock := st.Lock(name)
	defer unlock()
	root, err := m.volumeHostDir(ctx, st, name)
	if err != nil {
		return volume.Entry{}, err
	}
	return volume.WriteFile(root, path, r, mode)
}

// ListVolumeDir lists directory path of volume name from the host side.
func (m *Manager) ListVolumeDir(ctx context.Context, name, path string) ([]volume.Entry, error) {
	st, err := m.volumes()
	if err != nil {
		return nil, err
	}
	unlock := st.Lock(name)
	defer unlock()
	root, err := m.volumeHostDir(ctx, st, name)
	if err != nil {
		return nil, err
	}
	return volume.ReadDir(root, path)
}
