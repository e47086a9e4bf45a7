package vm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"corral/internal/vminit"
)

// bootModules are what the guest needs before it can mount its disks and
// talk to the host; modules.dep adds their dependencies.
var bootModules = []string{"virtio_pci", "virtio_blk", "virtio_console", "virtio_net", "virtio_balloon", "overlay"}

// guestModules are loaded from the modules disk at boot: devices a sandbox
// expects to find even without modprobe in its image.
var guestModules = []string{"loop", "fuse"}

// kernel is an unpacked guest kernel: <dir>/vmlinuz and
// <dir>/lib/modules/<release> (scripts/deps.sh installs it).
type kernel struct {
	dir     string
	release string
}

func (k kernel) vmlinuz() string    { return filepath.Join(k.dir, "vmlinuz") }
func (k kernel) modulesDir() string { return filepath.Join(k.dir, "lib/modules", k.release) }

// findKernel resolves dir (normally <state>/vm/kernel/current).
func findKernel(dir string) (kernel, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return kernel{}, fmt.Errorf("guest kernel %s: %w (scripts/deps.sh installs it)", dir, err)
	}
	ents, err := os.ReadDir(filepath.Join(real, "lib/modules"))
	if err != nil || len(ents) != 1 {
		return kernel{}, fmt.Errorf("guest kernel %s: want exactly one lib/modules/<release>", real)
	}
	k := kernel{dir: real, release: ents[0].Name()}
	for _, p := range []string{k.vmlinuz(), filepath.Join(k.modulesDir(), "modules.dep")} {
		if _, err := os.Stat(p); err != nil {
			return kernel{}, fmt.Errorf("guest kernel %s: %w", real, err)
		}
	}
	return k, nil
}

// moduleClosure returns the module files (relative to the modules dir)
// that names need, dependencies before their users.
func (k kernel) moduleClosure(names []string) ([]string, error) {
	deps, err := readModulesDep(filepath.Join(k.modulesDir(), "modules.dep"))
	if err != nil {
		return nil, err
	}
	byName := map[string]string{}
	for p := range deps {
		byName[strings.TrimSuffix(filepath.Base(p), ".ko")] = p
	}
	var order []string
	seen := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, d := range deps[p] {
			visit(d)
		}
		order = append(order, p)
	}
	for _, n := range names {
		p, ok := byName[n]
		if !ok {
			continue // built into the kernel
		}
		visit(p)
	}
	return order, nil
}

func readModulesDep(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
	}
	return deps, sc.Err()
}

// initramfs returns the path of the initramfs for this kernel and agent
// binary, building it into cacheDir when missing. It holds /init (the
// corral binary), /dev/console, the boot modules and their list.
func (k kernel) initramfs(cacheDir, agentBinary string) (string, error) {
	mods, err := k.moduleClosure(bootModules)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "initramfs-v1\n%s\n%s\n", k.release, strings.Join(mods, "\n"))
	if err := hashFile(h, agentBinary); err != nil {
		return "", err
	}
	out := filepath.Join(cacheDir, "initramfs-"+hex.EncodeToString(h.Sum(nil))[:24]+".cpio")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	return out, writeAtomic(out, func(w io.Writer) error { return k.writeInitramfs(w, agentBinary, mods) })
}

func (k kernel) writeInitramfs(w io.Writer, agentBinary string, mods []string) error {
	c := &cpioWriter{w: w}
	for _, d := range []string{"dev", "proc", "sys", "mnt", "lib", "lib/modules", "lib/modules/" + k.release} {
		if err := c.dir(d); err != nil {
			return err
		}
	}
	if err := c.charDev("dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	if err := addFile(c, "init", agentBinary, 0o755); err != nil {
		return err
	}
	root := filepath.Join("lib/modules", k.release)
	made := map[string]bool{root: true}
	var list []string
	for _, m := range mods {
		dst := filepath.Join(root, m)
		if err := mkdirs(c, filepath.Dir(dst), made); err != nil {
			return err
		}
		if err := addFile(c, dst, filepath.Join(k.modulesDir(), m), 0o644); err != nil {
			return err
		}
		list = append(list, "/"+dst)
	}
	body := strings.Join(list, "\n") + "\n"
	if err := c.file(strings.TrimPrefix(vminit.ModulesList, "/"), 0o644, int64(len(body)), strings.NewReader(body)); err != nil {
		return err
	}
	return c.close()
}

// mkdirs writes directory entries for dir and its parents not in made,
// parents first.
func mkdirs(c *cpioWriter, dir string, made map[string]bool) error {
	if made[dir] || dir == "." || dir == "/" {
		return nil
	}
	if err := mkdirs(c, filepath.Dir(dir), made); err != nil {
		return err
	}
	made[dir] = true
	return c.dir(dir)
}

// addFile copies the host file src into the archive as name.
func addFile(c *cpioWriter, name, src string, perm uint32) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return c.file(name, perm, fi.Size(), f)
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}
