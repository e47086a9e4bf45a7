package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// kernelRelease is the release of the guest kernel deps.sh installed.
func kernelRelease(t *testing.T) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(vmKernel, "lib/modules"))
	if err != nil || len(ents) != 1 {
		t.Fatalf("guest kernel modules at %s: %v", vmKernel, err)
	}
	return ents[0].Name()
}

// --runtime vm is a real machine: its own kernel, loop devices, overlay
// mounts; what gVisor refuses, with a clear error.
func TestVMRuntime(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	release := kernelRelease(t)
	if out := d.mustCLI("run", "--runtime", "vm", "--", "uname", "-r"); strings.TrimSpace(out) != release {
		t.Errorf("vm uname -r = %q, want the guest kernel %s", out, release)
	}
	if out := d.mustCLI("run", "--", "uname", "-r"); strings.TrimSpace(out) == release {
		t.Errorf("the gvisor sandbox runs the guest kernel %s", release)
	}
	id := d.create("--runtime", "vm")
	var sb struct {
		Runtime     string            `json:"runtime"`
		RuntimeInfo map[string]string `json:"runtime_info"`
	}
	if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil {
		t.Fatal(err)
	}
	if a := sb.RuntimeInfo["accel"]; sb.Runtime != "vm" || (a != "tcg" && a != "kvm") || sb.RuntimeInfo["kernel"] != release {
		t.Errorf("inspect: runtime %q, runtime_info %v", sb.Runtime, sb.RuntimeInfo)
	}
	t.Logf("vm runtime_info: %v", sb.RuntimeInfo)
	checkVMResources(t, d)
	gv := d.create()
	const loop = `set -e
dd if=/dev/zero of=/tmp/disk.img bs=1M count=16 2>/dev/null
mkfs.ext4 -q /tmp/disk.img
mkdir -p /mnt/loop && mount -o loop /tmp/disk.img /mnt/loop
echo on-ext4 > /mnt/loop/f && cat /mnt/loop/f && grep -c ' /mnt/loop ext4 ' /proc/mounts`
	// The root is itself an overlay, which cannot be another overlay's
	// upper layer (as inside any container): the layers live on a tmpfs.
	const overlay = `set -e
mkdir -p /o && mount -t tmpfs tmpfs /o
mkdir -p /o/lower /o/upper /o/work /o/merged && echo low > /o/lower/f
mount -t overlay overlay -o lowerdir=/o/lower,upperdir=/o/upper,workdir=/o/work /o/merged
echo high >> /o/merged/f && cat /o/merged/f /o/upper/f`
	for name, tt := range map[string]struct{ script, want string }{
		"loop mount": {loop, "on-ext4\n1\n"}, "overlay mount": {overlay, "low\nhigh\nlow\nhigh\n"},
	} {
		if out, errs, code := d.cli("", "exec", id, "--", "sh", "-c", tt.script); code != 0 || out != tt.want {
			t.Errorf("%s in the vm: exit %d, %q %q", name, code, out, errs)
		}
		out, errs, code := d.cli("", "exec", gv, "--", "sh", "-c", tt.script)
		if code == 0 || !strings.Contains(errs, "ermission denied") && !strings.Contains(errs, "not permitted") {
			t.Errorf("%s in gvisor should fail clearly: exit %d, %q %q", name, code, out, errs)
		}
	}
}

// modprobe works in a vm: the kernel's whole module tree is in the guest.
// The image adds kmod to the base.
func TestVMModprobe(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.mustBuild(t.TempDir(), "base: debian:bookworm\nsteps:\n  - apt_install: [kmod]\n", "-t", "test/kmod:1")
	out, errs, code := d.cli("", "run", "--runtime", "vm", "--image", "test/kmod:1", "--", "sh", "-c", "modprobe isofs && grep -c '^isofs ' /proc/modules")
	if code != 0 || out != "1\n" {
		t.Errorf("modprobe in the vm: exit %d, %q %q", code, out, errs)
	}
	out, errs, code = d.cli("", "run", "--image", "test/kmod:1", "--", "modprobe", "isofs")
	if code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("modprobe in gvisor should fail clearly: exit %d, %q %q", code, out, errs)
	}
}

// Ten vm sandboxes created and removed leave no qemu process, socket,
// disk or cgroup behind.
func TestVMCreateRemoveLeavesNothing(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				out, errs, code := d.cli("", "create", "--runtime", "vm")
				if code != 0 {
					t.Errorf("worker %d: create: exit %d %s", w, code, errs)
					return
				}
				id := strings.TrimSpace(out)
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				if _, errs, code := d.cli("", "rm", id); code != 0 {
					t.Errorf("rm %s: %s", id, errs)
				}
			}
		}()
	}
	wg.Wait()
	if len(ids) != 10 {
		t.Fatalf("created %d vm sandboxes, want 10", len(ids))
	}
	d.assertNoLeaks(t, ids)
	if ents, _ := os.ReadDir(filepath.Join(d.state, "vm", "sandboxes")); len(ents) != 0 {
		t.Errorf("the vm runtime still lists %d sandboxes", len(ents))
	}
	if ents, _ := os.ReadDir(filepath.Join(d.state, "vm", "uids")); len(ents) != 0 {
		t.Errorf("%d QEMU uids still reserved", len(ents))
	}
}

// qemuUID is the uid the QEMU of vm sandbox id runs as.
func qemuUID(t *testing.T, d *daemon, id string) string {
	t.Helper()
	pid, _ := os.ReadFile(filepath.Join(d.state, "sandboxes", id, "qemu.pid"))
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid line for the QEMU of %s", id)
	return ""
}

// checkVMResources: the CPU limit (rounded up) sets the vCPUs and the CFS quota of the
// QEMU process's cgroup, --memory the guest's RAM (and QEMU's memory limit
// above it).
func checkVMResources(t *testing.T, d *daemon) {
	id := d.create("--runtime", "vm", "--cpu", "1", "--cpu-limit", "1.5", "--memory", "768")
	var sb struct {
		RuntimeInfo map[string]string `json:"runtime_info"`
	}
	if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil {
		t.Fatal(err)
	}
	if sb.RuntimeInfo["vcpus"] != "2" || sb.RuntimeInfo["ram_mb"] != "768" {
		t.Errorf("runtime_info %v, want 2 vcpus and 768 MB", sb.RuntimeInfo)
	}
	if out := d.mustCLI("exec", id, "--", "nproc"); strings.TrimSpace(out) != "2" {
		t.Errorf("the guest sees %q CPUs", out)
	}
	quota := readCgroup(t, "cpu", id, "cpu.cfs_quota_us", "cpu.max")
	if quota != "150000" && !strings.HasPrefix(quota, "150000 ") {
		t.Errorf("cpu quota of the vm's cgroup = %q, want 1.5 CPUs", quota)
	}
	procs := readCgroup(t, "cpu", id, "cgroup.procs", "cgroup.procs")
	if strings.TrimSpace(procs) == "" {
		t.Error("no process (QEMU) in the vm's cgroup")
	}
	if mem := readCgroup(t, "memory", id, "memory.limit_in_bytes", "memory.max"); mem == "" || mem == "max" {
		t.Errorf("no memory limit on the vm's cgroup: %q", mem)
	}
	// QEMU itself runs without root once the machine is set up.
	if uid := qemuUID(t, d, id); uid == "0" {
		t.Errorf("qemu runs as root")
	}
	d.mustCLI("rm", id)
}

// readCgroup reads a file of the vm cgroup of id, v1 name first.
func readCgroup(t *testing.T, controller, id, v1, v2 string) string {
	for _, p := range []string{filepath.Join("/sys/fs/cgroup", controller, "corral-vm", id, v1), filepath.Join("/sys/fs/cgroup/corral-vm", id, v2)} {
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Errorf("no %s cgroup file for %s", controller, id)
	return ""
}

// A vm whose QEMU dies (killed from outside) ends as crashed, and nothing
// of it is left.
func TestVMCrashReconciled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create("--runtime", "vm")
	b, err := os.ReadFile(filepath.Join(d.state, "sandboxes", id, "qemu.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	out, _, _ := d.cli("", "wait", id, "--timeout", "60s")
	if strings.TrimSpace(out) != "137" {
		t.Errorf("wait after QEMU was killed printed %q, want 137", out)
	}
	var sb struct {
		State     string `json:"state"`
		EndReason string `json:"end_reason"`
	}
	if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil {
		t.Fatal(err)
	}
	if sb.State != "terminated" || sb.EndReason != "crashed" {
		t.Errorf("after QEMU died: state %s, reason %s", sb.State, sb.EndReason)
	}
	d.assertNoLeaks(t, []string{id})
}
