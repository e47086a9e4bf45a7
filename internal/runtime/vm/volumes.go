package vm

import (
	"fmt"

	"corral/internal/runtime"
	"corral/internal/vminit"
)

// A volume reaches a guest as its ext4 image on a virtio disk, which the
// guest's kernel mounts at the volume's path (vminit). Not virtio-9p:
// Debian's cloud kernel has no 9p, there is no virtiofsd here, and a 9p
// server in QEMU would have to open host paths, which QEMU (unprivileged,
// a uid per sandbox, opening nothing by path) never does. The manager
// therefore gives a vm guest a volume alone: the host's mount of it is
// taken away first and no other sandbox may mount it meanwhile.

// volumeDisk is one volume's disk in machine.json.
type volumeDisk struct {
	Image    string `json:"image"`
	Serial   string `json:"serial"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// diskArg is one disk on QEMU's command line.
type diskArg struct {
	id, file, serial string
	ro               bool
	// keep: no discard, so the guest never punches holes in an image
	// whose blocks are allocated on purpose (a volume's).
	keep bool
}

// volumeDisks are the volumes' disks and what the guest mounts of them.
func volumeDisks(vols []runtime.Volume) ([]volumeDisk, []vminit.Volume) {
	var disks []volumeDisk
	var mounts []vminit.Volume
	for i, v := range vols {
		serial := fmt.Sprintf("%s%d", vminit.SerialVolumePrefix, i)
		disks = append(disks, volumeDisk{Image: v.Image, Serial: serial, ReadOnly: v.ReadOnly})
		mounts = append(mounts, vminit.Volume{Serial: serial, Path: v.GuestPath, ReadOnly: v.ReadOnly})
	}
	return disks, mounts
}

func volumeDiskArgs(disks []volumeDisk) []diskArg {
	var out []diskArg
	for i, d := range disks {
		out = append(out, diskArg{id: fmt.Sprintf("vol%d", i), file: d.Image, serial: d.Serial, ro: d.ReadOnly, keep: true})
	}
	return out
}
