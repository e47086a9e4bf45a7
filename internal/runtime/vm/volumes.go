package vm

import "corral/internal/runtime"

// A volume reaches a guest over NFSv3: its agent mounts it from a
// listener on the guest's loopback and relays each connection over the
// agent channel to the daemon's NFS server of the volume's host mount
// (the manager's volumes_nfs.go; docs/ARCHITECTURE.md, "Volumes on vm").
// So the runtime only loads the guest's NFS client: no disk, nothing of
// the volume in QEMU's command line or the guest's boot config. Not
// virtio-9p (Debian's cloud kernel has no 9p, there is no virtiofsd here)
// nor the image as a disk (one kernel at a time could mount it).

// nfsModules are the guest's NFSv3 client (modules.dep adds sunrpc,
// lockd, grace, nfs_acl, fscache and netfs).
var nfsModules = []string{"nfsv3"}

// modulesFor is what the guest loads from the modules disk at boot: the
// NFS client only when it mounts volumes (it costs boot time).
func modulesFor(p runtime.StartParams) []string {
	if len(p.Volumes) == 0 {
		return guestModules
	}
	return append(append([]string(nil), guestModules...), nfsModules...)
}

// diskArg is one disk on QEMU's command line.
type diskArg struct {
	id, file, serial string
	ro               bool
}
