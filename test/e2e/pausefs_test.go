package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A filesystem-only pause (pause --filesystem-only, E2B's keepMemory:
// false), on both runtimes: what the sandbox did to its files (a file
// made, one of its image changed, one deleted) is there after the
// resume; what ran is not (a new boot id, no background process); it
// keeps its id, address and egress; a paused sandbox is not resumed by
// a call on it; the second round goes across a daemon restart. Each
// pause's image replaces the last one, which is removed, and the last is
// removed when the sandbox ends.
func TestPauseFilesystem(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	w := newWorld(t)
	d := startDaemon(t, "--dns-upstream", w.dnsAddr)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testPauseFilesystem(t, d, rt) })
	}
	t.Run("on-timeout", func(t *testing.T) { testPauseFilesystemOnTimeout(t, d) })
	t.Run("bad-input", func(t *testing.T) {
		if _, errs, code := d.cli("", "create", "--pause-filesystem"); code == 0 || !strings.Contains(errs, "pause_on_timeout") {
			t.Errorf("--pause-filesystem alone: exit %d %q", code, errs)
		}
		if _, errs, code := d.cli("", "create", "--pause-on-timeout", "--pause-filesystem", "--auto-resume"); code == 0 || !strings.Contains(errs, "pause_filesystem") {
			t.Errorf("--pause-filesystem --auto-resume: exit %d %q", code, errs)
		}
	})
}

// pausedSandbox is what the tests read of inspect.
type pausedSandbox struct {
	State     string `json:"state"`
	PauseKind string `json:"pause_kind"`
	Image     string `json:"image"`
	Address   string `json:"address"`
}

func (d *daemon) inspectPaused(t *testing.T, id string) pausedSandbox {
	t.Helper()
	var sb pausedSandbox
	if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

func testPauseFilesystem(t *testing.T, d *daemon, rt string) {
	id := d.create("--runtime", rt, "--timeout", "10m")
	d.mustCLI("exec", id, "--", "sh", "-c", `set -e
mkdir -p /root/work && head -c 3000000 /dev/urandom > /root/work/blob
echo changed >> /etc/debian_version
rm /etc/motd
setsid sleep 1000 </dev/null >/dev/null 2>&1 &`)
	files := func() string {
		return d.mustCLI("exec", id, "--", "sh", "-c", "sha256sum /root/work/blob /etc/debian_version; test -e /etc/motd && echo motd is back || echo no motd")
	}
	bootID := func() string {
		return strings.TrimSpace(d.mustCLI("exec", id, "--", "cat", "/proc/sys/kernel/random/boot_id"))
	}
	before, boot := files(), bootID()
	addr := d.inspectPaused(t, id).Address
	var images []string
	for round, restart := range []bool{false, true} {
		if out := d.mustCLI("pause", "--filesystem-only", id); strings.TrimSpace(out) != "paused" {
			t.Fatalf("round %d: pause printed %q", round, out)
		}
		sb := d.inspectPaused(t, id)
		if sb.State != "paused" || sb.PauseKind != "filesystem" || !strings.HasPrefix(sb.Image, "sha256:") {
			t.Fatalf("round %d: after the pause: %+v", round, sb)
		}
		images = append(images, sb.Image)
		if _, errs, code := d.cli("", "exec", id, "--", "true"); code == 0 || !strings.Contains(errs, "paused") {
			t.Errorf("round %d: exec in a paused sandbox: exit %d %q", round, code, errs)
		}
		if round == 1 {
			// The first pause's image went when the second replaced it.
			if _, errs, code := d.cli("", "image", "inspect", images[0]); code == 0 || !strings.Contains(errs, "not found") {
				t.Errorf("the first pause's image %s is still there: exit %d %q", images[0], code, errs)
			}
		}
		if restart {
			d.stop()
			d.start()
			if sb := d.inspectPaused(t, id); sb.State != "paused" || sb.PauseKind != "filesystem" {
				t.Fatalf("after the daemon restart: %+v", sb)
			}
		}
		if out := d.mustCLI("resume", id); strings.TrimSpace(out) != "running" {
			t.Fatalf("round %d: resume printed %q", round, out)
		}
		if after := files(); after != before {
			t.Errorf("round %d: files changed across the pause:\n%s\n%s", round, before, after)
		}
		if now := bootID(); now == boot || now == "" {
			t.Errorf("round %d: boot id %q after the resume, %q before: it did not boot afresh", round, now, boot)
		} else {
			boot = now
		}
		if ps := d.mustCLI("exec", id, "--", "sh", "-c", "cat /proc/[0-9]*/comm 2>/dev/null | grep -cx sleep || true"); strings.TrimSpace(ps) != "0" {
			t.Errorf("round %d: a process of before the pause runs after it: %q", round, ps)
		}
		sb = d.inspectPaused(t, id)
		if sb.State != "running" || sb.PauseKind != "" || sb.Address != addr {
			t.Errorf("round %d: after the resume: %+v (address before: %s)", round, sb, addr)
		}
		if out := egress(d, id); !strings.HasPrefix(out, "inet ") {
			t.Errorf("round %d: no egress after the resume: %q", round, out)
		}
		d.mustCLI("exec", id, "--", "sh", "-c", "setsid sleep 1000 </dev/null >/dev/null 2>&1 &")
	}
	events := d.mustCLI("events", id)
	if !strings.Contains(events, "filesystem only") || !strings.Contains(events, "resumed") {
		t.Errorf("events lack the filesystem-only pause or the resume:\n%s", events)
	}
	d.mustCLI("rm", id)
	if _, errs, code := d.cli("", "image", "inspect", images[1]); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("the last pause's image %s outlived its sandbox: exit %d %q", images[1], code, errs)
	}
	d.assertNoLeaks(t, []string{id})
}

// pause_on_timeout with pause_filesystem: the lifetime's end pauses the
// sandbox filesystem-only, and an explicit resume boots it with its files.
func testPauseFilesystemOnTimeout(t *testing.T, d *daemon) {
	id := d.create("--timeout", "3s", "--pause-on-timeout", "--pause-filesystem")
	d.mustCLI("exec", id, "--", "sh", "-c", "echo kept > /root/marker")
	waitFor(t, 60*time.Second, "the sandbox paused at its 3 s timeout", func() bool { return d.inspectPaused(t, id).State == "paused" })
	if sb := d.inspectPaused(t, id); sb.PauseKind != "filesystem" {
		t.Fatalf("paused at its timeout as %q, not filesystem", sb.PauseKind)
	}
	d.mustCLI("resume", id)
	if out := strings.TrimSpace(d.mustCLI("exec", id, "--", "cat", "/root/marker")); out != "kept" {
		t.Errorf("the marker after the resume: %q", out)
	}
	d.mustCLI("rm", id)
}
