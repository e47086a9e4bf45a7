package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"corral/internal/records"
	"corral/internal/seal"
)

// The must-show, on both runtimes: a fork into 5 gives copies
// that have the parent's files and running processes, whose changes are
// their own, and each of which is a different machine: hostname, machine
// id, boot_id (the agent mounts it in a vm guest, the runtime in a gVisor
// copy), first bytes of /dev/urandom, address. The parent runs on.
func TestFork(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testFork(t, d, rt) })
	}
}

func testFork(t *testing.T, d *daemon, rt string) {
	parent := d.create("--runtime", rt, "--tag", "team=x")
	d.mustCLI("exec", parent, "--", "sh", "-c", `set -e
mkdir -p /srv && echo parent > /srv/state
setsid sh -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.2; done' </dev/null >/dev/null 2>&1 &
sleep 1`)
	parentBootID := d.mustCLI("exec", parent, "--", "cat", "/proc/sys/kernel/random/boot_id")
	copies := strings.Fields(d.mustCLI("fork", parent, "-n", "5"))
	if len(copies) != 5 {
		t.Fatalf("fork printed %q", copies)
	}
	if out := d.mustCLI("snapshot", "ls"); strings.Contains(out, parent) {
		t.Errorf("the fork's snapshot outlived it:\n%s", out)
	}
	identity := `hostname; cat /etc/machine-id /proc/sys/kernel/random/boot_id; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; echo
awk '$2 == "00000000" { print $3 }' /proc/net/route; cat /srv/state; cat /tmp/count`
	seen := map[string]string{}
	bootIDs := map[string]bool{}
	copyBootID := map[string]string{}
	for i, c := range copies {
		var sb struct {
			State string            `json:"state"`
			Tags  map[string]string `json:"tags"`
		}
		if err := json.Unmarshal([]byte(d.mustCLI("inspect", c)), &sb); err != nil || sb.State != "running" {
			t.Fatalf("copy %s: %q %v", c, sb.State, err)
		}
		if sb.Tags["team"] != "x" || sb.Tags["corral.forked_from"] != parent {
			t.Errorf("copy %s tags: %v", c, sb.Tags)
		}
		if i == 0 {
			d.mustCLI("exec", c, "--", "sh", "-c", "echo changed-in-copy > /srv/state; touch /srv/only-in-copy")
		}
		f := strings.Split(strings.TrimSpace(d.mustCLI("exec", c, "--", "sh", "-c", identity)), "\n")
		if len(f) != 7 {
			t.Fatalf("copy %s: %q", c, f)
		}
		if f[0] != c {
			t.Errorf("copy %s has hostname %q", c, f[0])
		}
		if out := d.mustCLI("exec", c, "--", "sh", "-c", `cat /etc/hostname; getent hosts "$(hostname)" | awk '{print $2}'`); out != c+"\n"+c+"\n" {
			t.Errorf("copy %s: /etc/hostname and /etc/hosts say %q", c, out)
		}
		want := "parent"
		if i == 0 {
			want = "changed-in-copy"
		}
		if f[5] != want {
			t.Errorf("copy %d reads %q, want %q", i, f[5], want)
		}
		n1, _ := strconv.Atoi(f[6])
		// Waits (5 s at most) for the counter to pass n1, then reads it.
		next := "for i in $(seq 50); do [ \"$(cat /tmp/count)\" -gt " + strconv.Itoa(n1) + " ] && break; sleep 0.1; done; cat /tmp/count"
		if n2, _ := strconv.Atoi(strings.TrimSpace(d.mustCLI("exec", c, "--", "sh", "-c", next))); n1 < 5 || n2 <= n1 {
			t.Errorf("copy %s: the parent's counter did not come along running (%d, then %d)", c, n1, n2)
		}
		for k, v := range map[string]string{"machine id": f[1], "urandom": f[3], "gateway": f[4]} {
			if prev, dup := seen[k+v]; dup {
				t.Errorf("copies %s and %s share their %s %q", prev, c, k, v)
			}
			seen[k+v] = c
		}
		bootIDs[f[2]] = true
		copyBootID[c] = f[2]
	}
	if len(bootIDs) != len(copies) || bootIDs[strings.TrimSpace(parentBootID)] {
		t.Errorf("copies share boot ids, or have the parent's %s: %v", parentBootID, bootIDs)
	}
	if out := d.mustCLI("exec", parent, "--", "cat", "/proc/sys/kernel/random/boot_id"); out != parentBootID {
		t.Errorf("the parent's boot_id changed: %q, then %q", parentBootID, out)
	}
	if rt == "vm" { // each QEMU runs as a uid of its own, never root
		uids := map[string]string{}
		for _, c := range append([]string{parent}, copies...) {
			uid := qemuUID(t, d, c)
			if prev, dup := uids[uid]; dup || uid == "0" {
				t.Errorf("the QEMUs of %s and %s run as uid %s", prev, c, uid)
			}
			uids[uid] = c
		}
	}
	for _, c := range append([]string{parent}, copies[1:]...) {
		if _, _, code := d.cli("", "exec", c, "--", "test", "-e", "/srv/only-in-copy"); code == 0 {
			t.Errorf("%s sees a file made in copy %s", c, copies[0])
		}
	}
	if out := d.mustCLI("exec", parent, "--", "cat", "/srv/state"); out != "parent\n" {
		t.Errorf("the parent reads %q", out)
	}
	// A copy is a sandbox of its own: it pauses and resumes though the
	// fork's snapshot is gone.
	d.mustCLI("pause", copies[1])
	d.mustCLI("resume", copies[1])
	if out := d.mustCLI("exec", copies[1], "--", "cat", "/srv/state"); out != "parent\n" {
		t.Errorf("copy %s after a pause and resume reads %q", copies[1], out)
	}
	if out := strings.TrimSpace(d.mustCLI("exec", copies[1], "--", "cat", "/proc/sys/kernel/random/boot_id")); out != copyBootID[copies[1]] {
		t.Errorf("copy %s's boot_id after a pause and resume: %q, want %q", copies[1], out, copyBootID[copies[1]])
	}
	// A copy of a copy gets its own boot_id too.
	grand := strings.Fields(d.mustCLI("fork", copies[1], "-n", "1"))
	if len(grand) != 1 {
		t.Fatalf("fork of a copy printed %q", grand)
	}
	if out := strings.TrimSpace(d.mustCLI("exec", grand[0], "--", "cat", "/proc/sys/kernel/random/boot_id")); bootIDs[out] || out == strings.TrimSpace(parentBootID) {
		t.Errorf("the copy of a copy has boot_id %q, not one of its own", out)
	}
	copies = append(copies, grand[0])
	d.mustCLI(append([]string{"rm"}, append(copies, parent)...)...)
	d.assertNoLeaks(t, append(copies, parent))
}

// Memory snapshots are durable objects: named, listed, inspected (with
// the runtime and agent versions that made them), kept across a daemon
// restart, restored as new sandboxes, refused with a clear error where
// they cannot be restored, and removed.
func TestMemorySnapshots(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			src := d.create("--runtime", rt)
			d.mustCLI("exec", src, "--", "sh", "-c", "echo kept > /root/mark")
			name := "snap-test-" + rt
			snap := strings.TrimSpace(d.mustCLI("snapshot", "mem", src, "--name", name))
			if !strings.HasPrefix(snap, "snap-") {
				t.Fatalf("snapshot mem printed %q", snap)
			}
			if _, errs, code := d.cli("", "snapshot", "mem", src, "--name", name); code == 0 || !strings.Contains(errs, "exists") {
				t.Errorf("a second snapshot named %s: exit %d %q", name, code, errs)
			}
			d.mustCLI("exec", src, "--", "sh", "-c", "echo after > /root/mark") // the source runs on
			var rec struct {
				ID, Runtime   string
				RV            string `json:"runtime_version"`
				AV            string `json:"agent_version"`
				SB            string `json:"sandbox_id"`
				AgentProtocol int    `json:"agent_protocol"`
				Size          int64  `json:"size_bytes"`
			}
			if err := json.Unmarshal([]byte(d.mustCLI("snapshot", "inspect", name)), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.ID != snap || rec.Runtime != rt || rec.RV == "" || rec.AV == "" || rec.AgentProtocol < 1 || rec.SB != src || rec.Size <= 0 {
				t.Errorf("inspect: %+v", rec)
			}
			d.stop()
			d.start()
			if out := d.mustCLI("snapshot", "ls"); !strings.Contains(out, snap) || !strings.Contains(out, name) {
				t.Fatalf("after a restart the list lacks %s:\n%s", snap, out)
			}
			other := "vm"
			if rt == "vm" {
				other = "gvisor"
			}
			if _, errs, code := d.cli("", "create", "--from-snapshot", name, "--runtime", other); code == 0 || !strings.Contains(errs, "runtime") {
				t.Errorf("a %s sandbox from a %s snapshot: exit %d %q", other, rt, code, errs)
			}
			copyID := d.create("--from-snapshot", name)
			if out := d.mustCLI("exec", copyID, "--", "cat", "/root/mark"); out != "kept\n" {
				t.Errorf("the copy reads %q", out)
			}
			// A snapshot another runtime version made is refused, saying so.
			d.stop()
			setSnapshotRuntimeVersion(t, d, snap, "an older "+rt)
			d.start()
			_, errs, code := d.cli("", "create", "--from-snapshot", snap)
			if code == 0 || !strings.Contains(errs, "cannot restore") || !strings.Contains(errs, "an older "+rt) {
				t.Errorf("an incompatible snapshot: exit %d %q", code, errs)
			}
			d.mustCLI("snapshot", "rm", name)
			if _, errs, code := d.cli("", "snapshot", "inspect", snap); code == 0 || !strings.Contains(errs, "not found") {
				t.Errorf("inspect after rm: exit %d %q", code, errs)
			}
			if out := d.mustCLI("exec", copyID, "--", "cat", "/root/mark"); out != "kept\n" {
				t.Errorf("the copy after its snapshot went: %q", out)
			}
			d.mustCLI("rm", src, copyID)
			d.assertNoLeaks(t, []string{src, copyID})
		})
	}
	if out := strings.TrimSpace(d.mustCLI("snapshot", "ls")); strings.Count(out, "\n") != 0 {
		t.Errorf("snapshots left:\n%s", out)
	}
}

// setSnapshotRuntimeVersion rewrites a stopped daemon's record of a
// snapshot as if another runtime version had made it.
func setSnapshotRuntimeVersion(t *testing.T, d *daemon, id, version string) {
	ctx := context.Background()
	key, err := seal.Load(filepath.Join(d.state, "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := records.Open(ctx, filepath.Join(d.state, "corral.db"), key)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.GetSnapshot(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rec.RuntimeVersion = version
	if err := st.DeleteSnapshot(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSnapshot(ctx, rec); err != nil {
		t.Fatal(err)
	}
}
