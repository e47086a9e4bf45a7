package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of what a sandbox writes on the host (internal/boundfs): the
// channel mount, the log mount, and a log's rotation threshold.
const (
	chanBound   = 64 << 10
	logBound    = 4 << 20
	rotateBytes = 1 << 20
)

// TestHostBackedPaths (issue 12, "host-backed paths"): a hostile root
// inside each runtime writes through every path that lands on the host (on
// gVisor the agent's channel directory and PID 1's stdout and stderr, on
// vm the serial console; on both a sparse file that an export would turn
// into zeros; on gVisor /dev/shm and /tmp, which are memory and the
// disk-bounded writable layer), far past their bounds and with the daemon
// down too; the
// host's files stay within their caps, no setuid or device file usable on
// the host appears, the state directory does not grow past the bounds, and
// the sandbox still works.
func TestHostBackedPaths(t *testing.T) {
	t.Parallel()
	t.Run("gvisor", func(t *testing.T) { testHostBackedGVisor(t, startDaemon(t)) })
	t.Run("vm", func(t *testing.T) { testHostBackedVM(t, startDaemon(t)) })
}

func testHostBackedGVisor(t *testing.T, d *daemon) {
	id := d.create("--disk", "0.25", "--timeout", "10m") // GiB
	dir := filepath.Join(d.state, "sandboxes", id)
	before := stateUsage(t, d.state) + filestoreBytes(t, dir)

	// The channel directory: big files, many entries, a device node and
	// a setuid binary.
	out := d.mustCLI("exec", id, "--", "sh", "-c", `
head -c 67108864 /dev/zero > /.corral/run/big 2>/dev/null; echo "big=$?"; rm -f /.corral/run/big
mknod /.corral/run/null c 1 3 2>/dev/null; echo "mknod=$?"
printf x > /.corral/run/suid && chmod 6755 /.corral/run/suid; echo "suid=$?"
n=0; while [ $n -lt 2000 ] && touch /.corral/run/e$n 2>/dev/null; do n=$((n+1)); done; echo "entries=$n"
rm -f /.corral/run/e*
ls /.corral/run`)
	t.Logf("in the channel directory: %s", strings.Join(strings.Fields(out), " "))
	if !strings.Contains(out, "big=1") || strings.Contains(out, "entries=2000") {
		t.Errorf("the channel directory took 64 MiB or 2,000 entries (its bound is 1,024 inodes): %s", out)
	}
	checkBoundedMount(t, filepath.Join(dir, "chan"), chanBound)
	if strings.Contains(out, "suid=0") {
		// The setuid file is on the host: it must be inert there.
		if fi, err := os.Stat(filepath.Join(dir, "chan", "suid")); err != nil || fi.Mode()&fs.ModeSetuid == 0 {
			t.Errorf("the guest's setuid file is not on the host as it said: %v %v", fi, err)
		}
	}
	checkNoUsableSpecialFiles(t, d.state)

	// PID 1's stdout and stderr: appended, rewritten at an offset, and
	// from a far offset (a sparse file), each far past the cap.
	d.mustCLI("exec", id, "--", "sh", "-c", `
head -c 33554432 /dev/zero | tr '\0' o > /proc/1/fd/1
head -c 33554432 /dev/zero | tr '\0' e > /proc/1/fd/2
dd if=/dev/zero of=/proc/1/fd/1 bs=1M seek=1048576 count=8 conv=notrunc 2>/dev/null
sleep 2; echo tail-marker > /proc/1/fd/2
true`)
	console := filepath.Join(dir, "log", "console.log")
	checkBoundedMount(t, filepath.Join(dir, "log"), logBound)
	waitRotated(t, console)

	// With the daemon down nothing rotates; the mount's bound holds.
	d.mustCLI("exec", id, "-d", "--", "sh", "-c", "sleep 2; head -c 67108864 /dev/zero | tr '\\0' z > /proc/1/fd/1; echo after-writer > /proc/1/fd/2")
	d.kill9()
	waitQuiet(t, console, 20*time.Second)
	checkBoundedMount(t, filepath.Join(dir, "log"), logBound)
	d.start()
	waitRotated(t, console)
	if out := d.mustCLI("exec", id, "--", "echo", "still-here"); strings.TrimSpace(out) != "still-here" {
		t.Errorf("exec after the writes: %q", out)
	}
	d.mustCLI("exec", id, "--", "sh", "-c", "echo content > /root/f")
	if out := d.mustCLI("fs", "get", id, "/root/f", "-"); strings.TrimSpace(out) != "content" {
		t.Errorf("files after the writes: %q", out)
	}
	// The channel mount held across a pause (its socket is made anew).
	d.mustCLI("pause", id)
	d.mustCLI("resume", id)
	if out := d.mustCLI("exec", id, "--", "echo", "resumed"); strings.TrimSpace(out) != "resumed" {
		t.Errorf("exec after resume: %q", out)
	}
	checkBoundedMount(t, filepath.Join(dir, "chan"), chanBound)

	// /dev/shm is the sentry's memory (a tmpfs of half the sandbox's
	// memory), not host disk; /tmp is part of the root's writable layer, a
	// file runsc keeps open and unlinked under upper/ (du does not see
	// it), which --disk bounds.
	out = d.mustCLI("exec", id, "--", "sh", "-c", `
head -c 67108864 /dev/zero > /dev/shm/fill; echo "shm=$?"; rm -f /dev/shm/fill`)
	shmLayer := filestoreBytes(t, dir)
	// Measured while the file exists: the sentry gives a removed file's
	// pages back to the layer's file in the background, so after the rm
	// they may be gone already (a CI run measured 16 KiB).
	out += d.mustCLI("exec", id, "--", "sh", "-c", `
head -c 134217728 /dev/zero > /tmp/fill; echo "tmp=$?"`)
	layer := filestoreBytes(t, dir)
	d.mustCLI("exec", id, "--", "rm", "-f", "/tmp/fill")
	out += d.mustCLI("exec", id, "--", "sh", "-c", `
head -c 402653184 /dev/zero > /root/fill 2>/dev/null; echo "root=$?"; rm -f /root/fill`)
	t.Logf("64 MiB into /dev/shm, 128 MiB into /tmp, 384 MiB into / on a 256 MiB disk: %s; the layer's file: %d KiB after /dev/shm, %d KiB after /tmp, %d KiB after /",
		strings.Join(strings.Fields(out), " "), shmLayer>>10, layer>>10, filestoreBytes(t, dir)>>10)
	if !strings.Contains(out, "shm=0") || !strings.Contains(out, "tmp=0") || !strings.Contains(out, "root=1") {
		t.Errorf("the writes did not go as expected: %s", out)
	}
	if shmLayer > 16<<20 {
		t.Errorf("/dev/shm landed on the host's disk: the layer's file holds %d KiB", shmLayer>>10)
	}
	if layer < 96<<20 {
		t.Errorf("/tmp is not on the writable layer: its file holds %d KiB after 128 MiB into /tmp", layer>>10)
	}
	if l := filestoreBytes(t, dir); l > 256<<20+8<<20 {
		t.Errorf("the writable layer's file holds %d KiB, past the 256 MiB disk", l>>10)
	}
	checkNoUsableSpecialFiles(t, d.state)
	bound := int64(256<<20 + chanBound + logBound + 4<<20)
	checkGrowth := func(when string) {
		after := stateUsage(t, d.state) + filestoreBytes(t, dir)
		t.Logf("state directory but the image store, the layer's file included, %s: %d KiB, %d KiB before", when, after>>10, before>>10)
		if grew := after - before; grew > bound {
			t.Errorf("%s: the state directory grew by %d KiB, past the bounds (the 256 MiB disk and the mounts)", when, grew>>10)
		}
	}
	checkGrowth("after the writes")

	// A sparse file of a terabyte costs the sandbox nothing; its export
	// (a filesystem snapshot, a build step) is refused, not written out.
	// (gVisor's serialiser allocates a file's whole size in the sandbox's
	// memory, so the sandbox may not survive it: its own loss, recorded.)
	d.mustCLI("exec", id, "--", "truncate", "-s", "1T", "/root/sparse")
	_, errs, code := d.cli("", "snapshot", "fs", id)
	if code == 0 || !strings.Contains(errs, "disk") {
		t.Errorf("snapshot fs of a sandbox with a 1 TiB sparse file: exit %d %q", code, errs)
	}
	checkGrowth("after the export")
	if _, _, code := d.cli("", "exec", id, "--", "true"); code != 0 {
		evs, _ := d.client.Events(context.Background(), id)
		t.Logf("the sandbox did not survive its export; events: %v", evs)
	}
	checkNoUsableSpecialFiles(t, d.state)
	_, _, _ = d.cli("", "rm", id)
	d.assertNoLeaks(t, []string{id})
}

func testHostBackedVM(t *testing.T, d *daemon) {
	id := d.create("--runtime", "vm", "--timeout", "10m")
	dir := filepath.Join(d.state, "sandboxes", id)
	console := filepath.Join(dir, "log", "console.log")

	// QEMU: the sandbox's own uid from its start, a seccomp filter, the
	// daemon's child (not a daemonized orphan).
	pid := qemuPid(t, dir)
	st := procStatus(t, pid)
	if st["Uid"] == "" || strings.Fields(st["Uid"])[0] == "0" || st["Seccomp"] != "2" || st["NoNewPrivs"] != "1" {
		t.Errorf("QEMU runs with Uid %q, Seccomp %q, NoNewPrivs %q; want non-root, filter (2), 1", st["Uid"], st["Seccomp"], st["NoNewPrivs"])
	}
	if st["PPid"] != strconv.Itoa(d.cmd.Process.Pid) {
		t.Errorf("QEMU's parent is %s, not the daemon (%d)", st["PPid"], d.cmd.Process.Pid)
	}

	// The serial console, as root in the guest, far past the cap.
	d.mustCLI("exec", id, "--", "sh", "-c", "head -c 6291456 /dev/zero | tr '\\0' s > /dev/ttyS0; echo serial-tail > /dev/ttyS0")
	checkBoundedMount(t, filepath.Join(dir, "log"), logBound)
	waitRotated(t, console)

	// QEMU outlives a daemon killed with -9, is nobody's zombie, and the
	// next daemon adopts it.
	dead := d.cmd.Process.Pid
	d.kill9()
	// Once the daemon is reaped, QEMU is reparented (or would be a zombie).
	poll(5*time.Second, func() bool { return procStatus(t, pid)["PPid"] != strconv.Itoa(dead) })
	if st := procStatus(t, pid); strings.HasPrefix(st["State"], "Z") || st["PPid"] == strconv.Itoa(dead) {
		t.Errorf("QEMU after the daemon's death: state %q, parent %s", st["State"], st["PPid"])
	}
	d.start()
	if out := d.mustCLI("exec", id, "--", "echo", "adopted"); strings.TrimSpace(out) != "adopted" {
		t.Errorf("exec after adoption: %q", out)
	}
	// A resume (QEMU restoring with -incoming) under the same confinement
	// starts a QEMU that is the new daemon's child, which reaps it.
	d.mustCLI("pause", id)
	d.mustCLI("resume", id)
	if out := d.mustCLI("exec", id, "--", "echo", "resumed"); strings.TrimSpace(out) != "resumed" {
		t.Errorf("exec after resume: %q", out)
	}
	pid = qemuPid(t, dir)
	if st := procStatus(t, pid); st["PPid"] != strconv.Itoa(d.cmd.Process.Pid) || st["Seccomp"] != "2" {
		t.Errorf("resumed QEMU: parent %s (daemon %d), Seccomp %q", st["PPid"], d.cmd.Process.Pid, st["Seccomp"])
	}
	checkNoUsableSpecialFiles(t, d.state)
	d.mustCLI("rm", id)
	d.assertNoLeaks(t, []string{id})
	if !poll(5*time.Second, func() bool { _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); return err != nil }) {
		t.Errorf("QEMU %d is still there after rm: %v", pid, procStatus(t, pid))
	}
}

// checkBoundedMount checks that dir is a tmpfs mount of at most bound
// bytes, nosuid, nodev and noexec, holding no more than bound.
func checkBoundedMount(t *testing.T, dir string, bound int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	size := int64(st.Blocks) * st.Bsize
	used := int64(st.Blocks-st.Bfree) * st.Bsize
	if st.Type != unix.TMPFS_MAGIC || size > bound || used > bound {
		t.Errorf("%s: type %#x, size %d, used %d; want a tmpfs of at most %d", dir, st.Type, size, used, bound)
	}
	if want := int64(unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC); st.Flags&want != want {
		t.Errorf("%s: mount flags %#x lack nosuid, nodev or noexec", dir, st.Flags)
	}
	if du := diskUsage(t, dir); du > bound {
		t.Errorf("%s holds %d bytes, over its bound %d", dir, du, bound)
	}
}

// checkNoUsableSpecialFiles walks the state directory's sandboxes: no
// device node, and no setuid or setgid file, unless on a mount that makes
// it inert (nodev, nosuid).
func checkNoUsableSpecialFiles(t *testing.T, state string) {
	t.Helper()
	_ = filepath.WalkDir(filepath.Join(state, "sandboxes"), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		dev := fi.Mode()&(fs.ModeDevice|fs.ModeCharDevice) != 0
		suid := fi.Mode().IsRegular() && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0
		if !dev && !suid {
			return nil
		}
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		if dev && st.Flags&unix.ST_NODEV == 0 {
			t.Errorf("a usable device node on the host: %s", p)
		}
		if suid && st.Flags&unix.ST_NOSUID == 0 {
			t.Errorf("a usable setuid/setgid file on the host: %s", p)
		}
		return nil
	})
}

// diskUsage is what du counts under path (allocated blocks, each
// hard-linked file once), in bytes.
func diskUsage(t *testing.T, path string) int64 {
	t.Helper()
	out, err := exec.Command("du", "-s", "-B1", "-x", path).Output()
	if err != nil {
		// du reads a tree that changes under it; once more.
		out, err = exec.Command("du", "-s", "-B1", "-x", path).Output()
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		t.Fatalf("du %s: %v", path, err)
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}

// stateUsage is diskUsage of the state directory but its image store,
// where a filesystem snapshot of the base image caches the base's layer
// (what the daemon makes, not what the sandbox writes).
func stateUsage(t *testing.T, state string) int64 {
	t.Helper()
	return diskUsage(t, state) - diskUsage(t, filepath.Join(state, "images"))
}

// filestoreBytes is what the gVisor sandbox in dir's writable layer holds
// on the host: runsc's file store under upper/, which the sandbox keeps
// open after unlinking it (found through /proc/*/fd).
func filestoreBytes(t *testing.T, dir string) int64 {
	t.Helper()
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	seen := map[uint64]bool{}
	var n int64
	for _, fd := range fds {
		link, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(link, filepath.Join(dir, "upper")+"/") {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(fd, &st); err == nil && !seen[st.Ino] {
			seen[st.Ino] = true
			n += st.Blocks * 512
		}
	}
	return n
}

// waitRotated waits for the daemon to rotate the log at path below the
// threshold (it rotates every second), keeping the previous part.
func waitRotated(t *testing.T, path string) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%s rotated below %d bytes", path, rotateBytes), func() bool {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil || st.Blocks*512 > rotateBytes+64<<10 {
			return false
		}
		prev, err := os.Stat(path + ".1")
		return err == nil && prev.Size() <= rotateBytes
	})
}

// waitQuiet waits until the log at path stops growing (a writer in the
// sandbox is done or blocked at the bound).
func waitQuiet(t *testing.T, path string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last int64 = -1
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks == last && st.Blocks*512 > rotateBytes {
			return
		}
		last = st.Blocks
	}
}

// qemuPid is the pid of the sandbox's QEMU.
func qemuPid(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "qemu.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// procStatus reads /proc/<pid>/status as key -> value.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// TestAgentChannelHijack (issue 12, hardening): a sandbox whose root
// replaces its agent's socket, or stops its agent (PID 1), ends as
// agent_channel_lost with an event saying what was seen, within a bounded
// time; one whose channel answers wrongly when a restarted daemon comes
// to adopt it ends the same way.
func TestAgentChannelHijack(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	const fake = `import os, socket, time
p = "/.corral/run/agent.sock"
os.remove(p)
s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(8)
while True:
    c, _ = s.accept(); c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\nnot the agent\n"); c.close()
`
	hijacked := d.create("--timeout", "5m")
	d.mustCLI("exec", hijacked, "-d", "--", "python3", "-c", fake)
	checkChannelLost(t, d, hijacked, "replaced", time.Minute)

	stopped := d.create("--timeout", "5m")
	d.mustCLI("exec", stopped, "-d", "--", "sh", "-c", "sleep 1; kill -STOP 1")
	checkChannelLost(t, d, stopped, "health check", 2*time.Minute)

	// Hijacked while no daemon watches: the next one finds an impostor.
	later := d.create("--timeout", "5m")
	if _, errs, code := d.cli(fake, "exec", later, "--", "sh", "-c", "cat > /root/fake.py"); code != 0 {
		t.Fatalf("writing the impostor: %s", errs)
	}
	sock := filepath.Join(d.state, "sandboxes", later, "chan", "agent.sock")
	agentSock, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	d.mustCLI("exec", later, "-d", "--", "sh", "-c", "sleep 2; exec python3 /root/fake.py")
	d.kill9()
	// The impostor's socket is a new file at the agent's path; it listens
	// as soon as it is bound.
	waitFor(t, 30*time.Second, "the impostor's socket", func() bool {
		fi, err := os.Stat(sock)
		return err == nil && !os.SameFile(fi, agentSock)
	})
	d.start()
	checkChannelLost(t, d, later, "", 2*time.Minute)

	// A sandbox that was left alone still works.
	ok := d.create()
	if out := d.mustCLI("exec", ok, "--", "echo", "fine"); strings.TrimSpace(out) != "fine" {
		t.Errorf("an untouched sandbox: %q", out)
	}
	d.mustCLI("rm", ok)
	d.assertNoLeaks(t, []string{hijacked, stopped, later, ok})
}

// checkChannelLost waits (within limit) for id to end as
// agent_channel_lost, with an event whose "seen" contains seen.
func checkChannelLost(t *testing.T, d *daemon, id, seen string, limit time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res, err := d.client.Wait(ctx, id, limit.Seconds())
	if err != nil {
		t.Fatalf("%s: wait: %v", id, err)
	}
	if res.EndReason != "agent_channel_lost" || res.ExitCode != 137 {
		t.Errorf("%s ended %q (%d), want agent_channel_lost (137)", id, res.EndReason, res.ExitCode)
	}
	evs, err := d.client.Events(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.Kind == "agent_channel_lost" {
			got = append(got, ev.Message+" "+fmt.Sprint(ev.Fields))
			if strings.Contains(ev.Fields["seen"]+ev.Message, seen) {
				t.Logf("%s ended %s after %s: %s %v", id, res.EndReason, time.Since(start).Round(time.Second), ev.Message, ev.Fields)
				return
			}
		}
	}
	t.Errorf("%s: no agent_channel_lost event that saw %q: %v", id, seen, got)
}
