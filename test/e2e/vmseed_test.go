package e2e

import (
	"os"
	"path/filepath"
	"strings"
)

// vmSeed holds the vm runtime's caches a test daemon built: the base
// image's root disk, the kernel modules' disk and the initramfs, hard
// links of the files each daemon made under <state>/vm/disks. A daemon
// starts with links to them, so each of the package's vm tests does not
// build the same 600 MB again (≈ 3 s of a loaded 2-core host each). The
// daemon finds a cached file by its name alone; the names carry what
// they were built from (the source's identity, the kernel release, the
// agent binary's hash), and the files are only ever read.
var vmSeed = filepath.Join(stateRoot, "vm-seed")

// seedVMDisks links the seeded caches into the daemon's state before it
// starts.
func seedVMDisks(state string) {
	ents, err := os.ReadDir(vmSeed)
	if err != nil || len(ents) == 0 {
		return
	}
	dst := filepath.Join(state, "vm", "disks")
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return
	}
	for _, e := range ents {
		_ = os.Link(filepath.Join(vmSeed, e.Name()), filepath.Join(dst, e.Name()))
	}
}

// harvestVMDisks links what the daemon's vm runtime built from the base
// image and kernel into the seed (a root disk of an image a test built
// names that test's state directory, and stays out).
func harvestVMDisks(state string) {
	src := filepath.Join(state, "vm", "disks")
	ents, err := os.ReadDir(src)
	if err != nil {
		return
	}
	if err := os.MkdirAll(vmSeed, 0o700); err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !seedable(src, name) {
			continue
		}
		_ = os.Link(filepath.Join(src, name), filepath.Join(vmSeed, name))
	}
}

// seedable reports a finished cache file (never a temporary one) built
// from the base image or the kernel: an initramfs, or a disk image (and
// its .src) whose recorded source is the base image or the kernel's.
func seedable(dir, name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	if strings.HasPrefix(name, "initramfs-") {
		return true
	}
	base := strings.TrimSuffix(strings.TrimSuffix(name, ".ext4"), ".src")
	src, err := os.ReadFile(filepath.Join(dir, base+".src"))
	if err != nil {
		return false
	}
	s := string(src)
	return s == rootfs || strings.HasPrefix(s, filepath.Dir(vmKernel)+"/")
}
