package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"corral/pkg/apiv1"
)

// Volumes: data that outlives sandboxes (a file written by one is read by
// the next, on either runtime), read-only mounts, a size bound that is
// ENOSPC inside and costs the host nothing more, host-side file calls
// that never leave the volume, survival of daemon restarts and kill -9,
// refusals (pause, memory snapshot, fork, removal while mounted) and bad
// input. One daemon for all of it.
func TestVolumes(t *testing.T) {
	t.Parallel()
	var state string
	// After the daemon's teardown (cleanups run last first): a volume a
	// failed run left mounted.
	t.Cleanup(func() {
		mnts, _ := filepath.Glob(filepath.Join(state, "volumes", "*", "mnt"))
		for _, m := range mnts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	})
	d := startDaemon(t)
	state = d.state
	d.mustCLI("volume", "create", "data")
	t.Run("badinput", func(t *testing.T) { d.volumeBadInput(t) })
	t.Run("gvisor", func(t *testing.T) { d.volumeGVisor(t) })
	t.Run("vm", func(t *testing.T) { d.volumeVM(t) })
	t.Run("restart", func(t *testing.T) { d.volumeRestart(t) })
}

// volumeBadInput: each bad request is a 4xx naming the problem, without a
// host path, and nothing is created.
func (d *daemon) volumeBadInput(t *testing.T) {
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/v1/volumes", `{"name":"../x"}`, 400, "volume name"},
		{"POST", "/v1/volumes", `{"name":"a/b"}`, 400, "volume name"},
		{"POST", "/v1/volumes", `{"name":"a..b"}`, 400, "volume name"},
		{"POST", "/v1/volumes", `{"name":"Up"}`, 400, "volume name"},
		{"POST", "/v1/volumes", `{"name":""}`, 400, "volume name"},
		{"POST", "/v1/volumes", `{"name":"ok","size_gib":-1}`, 400, "size_gib"},
		{"POST", "/v1/volumes", `{"name":"ok","size_gib":5000}`, 400, "size_gib"},
		{"POST", "/v1/volumes", `{"name":"ok","size":1}`, 400, "size"},
		{"POST", "/v1/volumes", `{"name":"data"}`, 409, "exists"},
		{"GET", "/v1/volumes/nope", "", 404, "nope"},
		{"DELETE", "/v1/volumes/nope", "", 404, "nope"},
		{"DELETE", "/v1/volumes/data?force=maybe", "", 400, "force"},
		{"GET", "/v1/volumes/data/files?path=/nope", "", 404, "/nope"},
		{"GET", "/v1/volumes/data/files?path=/", "", 400, "regular file"},
		{"PUT", "/v1/volumes/data/files?path=/", "x", 400, "path"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"/"}]}`, 400, "system directory"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"/proc"}]}`, 400, "/proc"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"/dev/x"}]}`, 400, "/dev"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"/sys"}]}`, 400, "/sys"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"/.corral/run"}]}`, 400, "/.corral"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"/usr"}]}`, 400, "system directory"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"data"}]}`, 400, "absolute"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"/x/../proc"}]}`, 400, "clean"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"../data","path":"/x"}]}`, 400, "volume name"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"a/b","path":"/x"}]}`, 400, "volume name"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"/x"},{"name":"data","path":"/y"}]}`, 400, "twice"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"nope","path":"/x"}]}`, 404, "nope"},
		{"POST", "/v1/sandboxes", `{"volumes":[{"name":"data","path":"/x"}],"auto_pause":true,"idle_timeout":60}`, 400, "paused"},
	} {
		status, body := d.api(c.method, c.path, d.token, c.body)
		if status != c.status || !strings.Contains(body, c.want) || strings.Contains(body, d.state) {
			t.Errorf("%s %s %s: %d %s, want %d naming %q", c.method, c.path, c.body, status, body, c.status, c.want)
		}
	}
	if _, errs, code := d.cli("", "create", "--volume", "data"); code == 0 || !strings.Contains(errs, "NAME:/path") {
		t.Errorf("create --volume data: exit %d, %q", code, errs)
	}
	ctx := context.Background()
	if sbs, err := d.client.List(ctx, ""); err != nil || len(sbs) != 0 {
		t.Errorf("bad input left sandboxes: %v %v", sbs, err)
	}
	vols, err := d.client.Volumes(ctx)
	if err != nil || len(vols) != 1 || vols[0].Name != "data" {
		t.Errorf("bad input changed the volumes: %+v %v", vols, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(d.state, "volumes")); len(ents) != 1 {
		t.Errorf("bad input left files in the volume store: %v", ents)
	}
}

// hostFree is the free bytes of the file system holding the state dir.
func (d *daemon) hostFree(t *testing.T) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.state, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

func (d *daemon) volumeGVisor(t *testing.T) {
	ctx := context.Background()
	a := d.create("--volume", "data:/data")
	d.mustCLI("exec", a, "--", "sh", "-c", "echo hello > /data/f")
	evs, err := d.client.Events(ctx, a)
	if err != nil || !hasEvent(evs, "volume_mounted", "data") {
		t.Errorf("no volume_mounted event: %+v %v", evs, err)
	}
	d.mustCLI("rm", a)

	// Read-only beside a read-write mount of the same volume: the reader
	// sees the writer's file, and cannot write.
	b := d.create("--volume", "data:/data:ro")
	if got := d.mustCLI("exec", b, "--", "cat", "/data/f"); got != "hello\n" {
		t.Errorf("a second sandbox reads %q, want hello", got)
	}
	if out, errs, code := d.cli("", "exec", b, "--", "sh", "-c", "echo x > /data/g"); code == 0 || !strings.Contains(out+errs, "Read-only file system") {
		t.Errorf("write to a ro mount: exit %d %q %q", code, out, errs)
	}
	d.mustCLI("volume", "create", "full", "--size", "1")
	c := d.create("--volume", "data:/data", "--volume", "full:/full")
	d.mustCLI("exec", c, "--", "sh", "-c", "echo concurrent > /data/h && ln -s /etc /data/esc && ln -s ../../../.. /data/up")
	if got := d.mustCLI("exec", b, "--", "cat", "/data/h"); got != "concurrent\n" {
		t.Errorf("the ro reader sees %q of a concurrent writer", got)
	}

	// Host side: put, get, ls; symlinks a sandbox left resolve inside.
	if _, errs, code := d.cli("put from host\n", "volume", "put", "data", "-", "/dir/x"); code != 0 {
		t.Fatalf("volume put: %s", errs)
	}
	if got := d.mustCLI("exec", b, "--", "cat", "/data/dir/x"); got != "put from host\n" {
		t.Errorf("a sandbox reads %q of a host put", got)
	}
	if got := d.mustCLI("volume", "get", "data", "/h", "-"); got != "concurrent\n" {
		t.Errorf("volume get: %q", got)
	}
	if got := d.mustCLI("volume", "ls", "data"); !strings.Contains(got, "esc -> /etc") || !strings.Contains(got, "dir") {
		t.Errorf("volume ls: %q", got)
	}
	for _, p := range []string{"/esc/passwd", "/up/etc/passwd", "/../../../../etc/passwd"} {
		if out, errs, code := d.cli("", "volume", "get", "data", p, "-"); code == 0 || strings.Contains(out, "root:") {
			t.Errorf("volume get %s left the volume: exit %d %q %q", p, code, out, errs)
		}
	}
	if _, errs, code := d.cli("x", "volume", "put", "data", "-", "/esc/owned"); code == 0 {
		t.Errorf("volume put through a symlink: exit 0 %q", errs)
	}
	if _, err := os.Stat("/etc/owned"); err == nil {
		t.Errorf("a put through the volume's symlink wrote the host's /etc")
	}

	// Full: ENOSPC inside, and the host's free space unchanged (the
	// image's blocks were allocated when the volume was made).
	before := d.hostFree(t)
	out, errs, code := d.cli("", "exec", c, "--", "dd", "if=/dev/zero", "of=/full/big", "bs=1M", "count=1100")
	if code == 0 || !strings.Contains(out+errs, "No space left") {
		t.Errorf("1100 MiB into a 1 GiB volume: exit %d %q %q", code, out, errs)
	}
	// (Other work on the host may write meanwhile: a sparse image would
	// have taken 1 GiB.)
	if drop := before - d.hostFree(t); drop > 512<<20 {
		t.Errorf("filling the volume took %d MiB of the host's disk", drop>>20)
	}
	if got := d.mustCLI("exec", c, "--", "sh", "-c", "echo ok > /data/after-full && cat /data/after-full"); got != "ok\n" {
		t.Errorf("after filling one volume, another gives %q", got)
	}

	// What a volume holds is never in a filesystem snapshot.
	d.mustCLI("snapshot", "fs", c, "-t", "test/vol:1")
	for _, pat := range []string{"data/h", "data/f", "full/big"} {
		if m, _ := filepath.Glob(filepath.Join(d.state, "images/layers/sha256/*/fs", pat)); len(m) > 0 {
			t.Errorf("an exported layer holds the volume's %s: %v", pat, m)
		}
	}
	for _, args := range [][]string{{"pause", c}, {"snapshot", "mem", c}, {"fork", c}} {
		if _, errs, code := d.cli("", args...); code == 0 || !strings.Contains(errs, "volume data") {
			t.Errorf("%v of a sandbox with volumes: exit %d %q", args, code, errs)
		}
	}
	if _, errs, code := d.cli("", "volume", "rm", "data"); code == 0 || !strings.Contains(errs, b) || !strings.Contains(errs, c) {
		t.Errorf("volume rm while mounted: exit %d %q", code, errs)
	}
	var v apiv1.Volume
	if err := json.Unmarshal([]byte(d.mustCLI("volume", "inspect", "full")), &v); err != nil || len(v.MountedBy) != 1 || v.UsedBytes == nil || *v.UsedBytes < 900<<20 {
		t.Errorf("volume inspect full: %+v %v", v, err)
	}
	d.mustCLI("rm", b)
	d.mustCLI("volume", "rm", "--force", "full")
	if sb, err := d.client.Get(ctx, c); err != nil || sb.State != "terminated" {
		t.Errorf("volume rm --force left its sandbox %v %v", sb, err)
	}
	if _, err := os.Stat(filepath.Join(d.state, "volumes", "full")); err == nil {
		t.Errorf("volume rm left its directory")
	}
}

func hasEvent(evs []apiv1.Event, kind, volume string) bool {
	for _, e := range evs {
		if e.Kind == kind && e.Fields["volume"] == volume {
			return true
		}
	}
	return false
}

// volumeVM: vm guests mount the volume over NFS from the daemon, all at
// once with gvisor sandboxes and the host-side calls. A vm writer (A) is
// read live by a second vm (B, read-only) and a gvisor sandbox (C); B
// cannot write even after remounting its mount read-write (the server
// refuses); a full volume is ENOSPC in a guest.
func (d *daemon) volumeVM(t *testing.T) {
	d.mustCLI("volume", "create", "vmfull", "--size", "1")
	a := d.create("--runtime", "vm", "--volume", "data:/data", "--volume", "vmfull:/full")
	if evs, err := d.client.Events(context.Background(), a); err != nil || !hasEvent(evs, "volume_mounted", "data") {
		t.Errorf("vm: no volume_mounted event: %+v %v", evs, err)
	}
	if got := d.mustCLI("exec", a, "--", "sh", "-c", "cat /data/f && echo from-vm > /data/vm"); got != "hello\n" {
		t.Errorf("a vm reads %q of what a gvisor sandbox wrote", got)
	}
	if got := d.mustCLI("volume", "get", "data", "/vm", "-"); got != "from-vm\n" {
		t.Errorf("host get while a vm mounts the volume: %q", got)
	}
	b := d.create("--runtime", "vm", "--volume", "data:/data:ro")
	c := d.create("--volume", "data:/data:ro")
	for _, r := range []string{b, c} {
		if got := d.mustCLI("exec", r, "--", "cat", "/data/vm", "/data/h"); got != "from-vm\nconcurrent\n" {
			t.Errorf("%s reads %q while the vm writer runs", r, got)
		}
	}
	// A concurrent writer: a new file, then new contents of a file the
	// readers have already read (close-to-open on vm; the gofer on gvisor).
	d.mustCLI("exec", a, "--", "sh", "-c", "echo one > /data/live")
	for _, r := range []string{b, c} {
		if got := d.mustCLI("exec", r, "--", "cat", "/data/live"); got != "one\n" {
			t.Errorf("%s reads %q of the writer's new file", r, got)
		}
	}
	d.mustCLI("exec", a, "--", "sh", "-c", "echo second-version > /data/live")
	for _, r := range []string{b, c} {
		if got := d.mustCLI("exec", r, "--", "cat", "/data/live"); got != "second-version\n" {
			t.Errorf("%s reads %q after the writer rewrote the file", r, got)
		}
	}
	if out, errs, code := d.cli("", "exec", b, "--", "sh", "-c", "echo x > /data/g"); code == 0 || !strings.Contains(out+errs, "Read-only file system") {
		t.Errorf("write to a ro mount on vm: exit %d %q %q", code, out, errs)
	}
	// The guest is root in its own kernel: the mount option is not the
	// guard, the server is.
	out, errs, code := d.cli("", "exec", b, "--", "sh", "-c", "mount -o remount,rw /data && echo x > /data/g")
	if code == 0 || !(strings.Contains(out+errs, "Read-only file system") || strings.Contains(out+errs, "Permission denied")) {
		t.Errorf("write after remounting rw: exit %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(d.state, "volumes", "data", "mnt", "g")); err == nil {
		t.Errorf("a read-only vm mount wrote the volume")
	}

	// Full: the host fills all but a few MiB, the guest's write runs out.
	mnt := filepath.Join(d.state, "volumes", "vmfull", "mnt")
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	fill, err := os.Create(filepath.Join(mnt, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fallocate(int(fill.Fd()), 0, 0, int64(st.Bavail)*st.Bsize-8<<20); err != nil {
		t.Fatal(err)
	}
	fill.Close()
	out, errs, code = d.cli("", "exec", a, "--", "dd", "if=/dev/zero", "of=/full/big", "bs=1M", "count=32", "conv=fsync")
	if code == 0 || !strings.Contains(out+errs, "No space left") {
		t.Errorf("32 MiB into a volume with 8 MiB free, on vm: exit %d %q %q", code, out, errs)
	}
	// A saved guest would hold NFS mounts no relay serves after restore.
	for _, args := range [][]string{{"pause", a}, {"snapshot", "mem", a}, {"fork", a}} {
		if _, errs, code := d.cli("", args...); code == 0 || !strings.Contains(errs, "volume data") {
			t.Errorf("%v of a vm sandbox with volumes: exit %d %q", args, code, errs)
		}
	}
	d.mustCLI("rm", a)
	d.mustCLI("rm", b)
	d.mustCLI("rm", c)
	d.mustCLI("volume", "rm", "vmfull")
}

// volumeRestart: sandboxes mounting a volume (gvisor, and vm over NFS
// from the daemon) survive kill -9 with their mounts working; the
// volume's data survives the sandbox, a restart and the host mount going
// away (as after a reboot).
func (d *daemon) volumeRestart(t *testing.T) {
	e := d.create("--volume", "data:/data")
	ev := d.create("--runtime", "vm", "--volume", "data:/data")
	d.mustCLI("exec", e, "--", "sh", "-c", "echo before-kill > /data/k")
	d.mustCLI("exec", ev, "--", "sh", "-c", "cat /data/k > /dev/null")
	d.kill9()
	d.start()
	if got := d.mustCLI("exec", e, "--", "sh", "-c", "cat /data/k && echo after-kill > /data/k2"); got != "before-kill\n" {
		t.Errorf("after kill -9 the sandbox reads %q", got)
	}
	// The guest's NFS client reconnects through the adopted agent; the
	// file handles it holds are the kernel's and still resolve.
	if got := d.mustCLI("exec", ev, "--", "sh", "-c", "cat /data/k /data/k2 && echo vm-after-kill > /data/k3"); got != "before-kill\nafter-kill\n" {
		t.Errorf("after kill -9 the vm sandbox reads %q", got)
	}
	d.mustCLI("rm", ev)
	d.mustCLI("rm", e)
	d.stop()
	if err := syscall.Unmount(filepath.Join(d.state, "volumes", "data", "mnt"), 0); err != nil {
		t.Fatalf("unmounting the volume as a reboot would: %v", err)
	}
	d.start()
	f := d.create("--volume", "data:/data:ro")
	if got := d.mustCLI("exec", f, "--", "cat", "/data/f", "/data/k", "/data/k2", "/data/k3"); got != "hello\nbefore-kill\nafter-kill\nvm-after-kill\n" {
		t.Errorf("after restarts a new sandbox reads %q", got)
	}
	d.mustCLI("rm", f)
	d.mustCLI("volume", "rm", "data")
	if out := d.mustCLI("volume", "ls"); strings.Contains(out, "data") {
		t.Errorf("volume ls after rm: %q", out)
	}
}
