package vm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/cgroups"
	"corral/internal/runtime"
	"corral/internal/runtime/runtimetest"
)

// The suite boots real guests under QEMU (TCG here; KVM where /dev/kvm
// is usable). It needs root, QEMU and the guest kernel (CORRAL_VM_KERNEL or
// /var/lib/corral/vm/kernel/current) and the base rootfs, all of which
// scripts/deps.sh installs; it skips without them.
var env struct {
	skip     string
	kernel   string
	rootfs   string
	agent    string
	base     string
	cgParent string
}

func TestMain(m *testing.M) {
	code := func() int {
		undo, err := setup()
		if err != nil {
			fmt.Fprintln(os.Stderr, "vm tests: setup:", err)
			return 1
		}
		defer undo()
		return m.Run()
	}()
	os.Exit(code)
}

func setup() (func(), error) {
	env.kernel = getenv("CORRAL_VM_KERNEL", "/var/lib/corral/vm/kernel/current")
	env.rootfs = getenv("CORRAL_BASE_ROOTFS", "/var/lib/corral/rootfs/debian-bookworm")
	_, qemuErr := exec.LookPath("qemu-system-x86_64")
	switch {
	case os.Geteuid() != 0:
		env.skip = "needs root to run QEMU with taps and cgroups"
	case qemuErr != nil:
		env.skip = "no qemu-system-x86_64 (scripts/deps.sh installs it)"
	case !exists(filepath.Join(env.kernel, "vmlinuz")):
		env.skip = "no guest kernel at " + env.kernel + " (scripts/deps.sh installs it)"
	case !exists(filepath.Join(env.rootfs, "bin/sh")):
		env.skip = "no base rootfs at " + env.rootfs + " (scripts/deps.sh builds it)"
	}
	if env.skip != "" {
		return func() {}, nil
	}
	// A crashed run's guests and cgroups are swept first.
	scratch, err := runtimetest.NewScratch("corral-vm-test")
	if err != nil {
		return nil, err
	}
	base := scratch.Dir
	env.base, env.cgParent = base, scratch.Cgroup
	undo := func() {
		_ = os.RemoveAll(base)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cgroups.Remove(ctx, env.cgParent)
	}
	env.agent = filepath.Join(base, "corral")
	build := exec.Command("go", "build", "-o", env.agent, "corral/cmd/corral")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		undo()
		return nil, fmt.Errorf("building corral: %v\n%s", err, out)
	}
	return undo, nil
}

func getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func newRuntime(t testing.TB) *Runtime {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	r, err := New(Config{
		KernelDir: env.kernel, StateDir: filepath.Join(env.base, "state"), AgentBinary: env.agent,
		CgroupParent: env.cgParent,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestConformance runs the shared runtime suite against QEMU guests.
func TestConformance(t *testing.T) {
	r := newRuntime(t)
	runtimetest.Run(t, runtimetest.Env{
		Runtime: r, RootFS: env.rootfs, AgentBinary: env.agent, Dir: filepath.Join(env.base, "conformance"),
		Leftovers: func(ref runtime.Ref) []string { return leftoversOf(r, ref) },
	})
}

// leftoversOf lists what the host still has of one sandbox: a process
// naming its directory (on its command line or in its environment, as
// QEMU does), a mount under it, its cgroup, its directory, its index
// entry.
func leftoversOf(r *Runtime, ref runtime.Ref) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		for _, f := range []string{"cmdline", "environ"} {
			if b, err := os.ReadFile(filepath.Join(p, f)); err == nil && strings.Contains(string(b), ref.Dir) {
				out = append(out, "process "+p)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), " "+ref.Dir+"/") {
		out = append(out, "a mount under "+ref.Dir)
	}
	if ok, _ := cgroups.Exists(r.cgroup(ref.ID)); ok {
		out = append(out, "cgroup "+r.cgroup(ref.ID))
	}
	for _, p := range []string{ref.Dir, r.indexPath(ref.ID)} {
		if exists(p) {
			out = append(out, "file "+p)
		}
	}
	return out
}

// TestRawBoot: the bench's baseline boots the same command line (console
// on a pipe) to the guest's ready line.
func TestRawBoot(t *testing.T) {
	r := newRuntime(t)
	d, err := r.RawBoot(context.Background(), env.rootfs, filepath.Join(env.base, "raw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("raw boot: %s", d)
}

// PruneCaches drops the disk image of a root directory that is gone and
// keeps the one of a directory still there.
func TestPruneCaches(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	keep, gone := t.TempDir(), t.TempDir()
	for _, d := range []string{keep, gone} {
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var disks []string
	for _, d := range []string{keep, gone} {
		name, err := rootDiskName(d)
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.roDisk(ctx, d, name)
		if err != nil {
			t.Fatal(err)
		}
		disks = append(disks, p)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PruneCaches(); err != nil {
		t.Fatal(err)
	}
	if !exists(disks[0]) || exists(disks[1]) {
		t.Errorf("after prune: kept image exists=%v, gone image exists=%v", exists(disks[0]), exists(disks[1]))
	}
}

// Sandboxes get distinct QEMU uids, released at Destroy.
func TestAllocUID(t *testing.T) {
	r := &Runtime{cfg: Config{StateDir: t.TempDir()}}
	seen := map[int]string{}
	for i := range 50 {
		id := fmt.Sprintf("sb-%d", i)
		uid, err := r.allocUID(id)
		if err != nil {
			t.Fatal(err)
		}
		if uid < uidBase || uid >= uidBase+uidCount {
			t.Fatalf("uid %d outside the range", uid)
		}
		if prev, dup := seen[uid]; dup {
			t.Fatalf("%s and %s share uid %d", prev, id, uid)
		}
		seen[uid] = id
		if again, _ := r.allocUID(id); again != uid {
			t.Errorf("%s: a second allocation gave %d, not %d", id, again, uid)
		}
	}
	for uid, id := range seen {
		if err := r.releaseUIDs(id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(r.uidsDir(), fmt.Sprint(uid))); !os.IsNotExist(err) {
			t.Errorf("uid %d of %s not released: %v", uid, id, err)
		}
	}
}
