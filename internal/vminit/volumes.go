package vminit

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SerialVolumePrefix begins the serial of a volume's disk ("corral-vol-0").
const SerialVolumePrefix = "corral-vol-"

// Volume is a volume's disk and where the guest mounts it.
type Volume struct {
	Serial   string `json:"serial"`
	Path     string `json:"path"` // absolute, clean (checked by the host)
	ReadOnly bool   `json:"read_only,omitempty"`
}

// mountVolumes mounts each volume's ext4 disk at its path in the new root
// (made if missing: on the root overlay, so an export shows at most the
// empty directory, never the volume's files). nosuid and nodev, as on the
// host; read-only ones without replaying a journal (noload), so a
// read-only mount never writes the image.
func mountVolumes(vols []Volume) error {
	if len(vols) == 0 {
		return nil
	}
	serials := make([]string, len(vols))
	for i, v := range vols {
		serials[i] = v.Serial
	}
	disks, err := findDisks(diskWait, serials...)
	if err != nil {
		return err
	}
	for _, v := range vols {
		dst := filepath.Join(newRoot, filepath.Clean("/"+v.Path))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("volume at %s: %w", v.Path, err)
		}
		flags, data := uintptr(unix.MS_NOSUID|unix.MS_NODEV), ""
		if v.ReadOnly {
			flags, data = flags|unix.MS_RDONLY, "noload"
		}
		if err := unix.Mount(disks[v.Serial], dst, "ext4", flags, data); err != nil {
			return fmt.Errorf("mounting the volume at %s: %w", v.Path, err)
		}
	}
	return nil
}
