package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/internal/cgroups"
)

// grow allocates and touches memory 16 MiB at a time until something
// stops it.
const grow = "python3 -c 'a = []\nwhile True: a.append(bytearray(16 << 20))'"

// A sandbox that ends by itself says why, on both runtimes, within
// seconds: out of memory (gVisor: the host's OOM killer kills the
// sandbox; a vm whose kernel panics on OOM), a guest kernel panic and a
// guest's power-off. The exec that was running says so, wait prints it,
// and the event log names it.
func TestEndCauses(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	// The base image has no poweroff binary: the reboot system call
	// (LINUX_REBOOT_CMD_POWER_OFF) is what poweroff -f makes.
	const powerOff = `python3 -c 'import ctypes; ctypes.CDLL(None).sync(); ctypes.CDLL(None).reboot(0x4321fedc)'`
	for _, tt := range []struct {
		name, runtime, script, reason, detail string
	}{
		// One allocation past the limit, with the Sentry made the host
		// OOM killer's first choice (the runtime makes guest processes
		// its first: TestOOMKilledProcess): the whole sandbox ends.
		{"gvisor oom", "gvisor", "python3 -c 'a = bytearray(400 << 20)'", "oom", "out of memory (the sandbox's memory limit is 128 MiB)"},
		{"vm oom panic", "vm", "sysctl -qw vm.panic_on_oom=1 && " + grow, "oom", "out of memory (the vm's memory is"},
		{"vm panic", "vm", "echo c > /proc/sysrq-trigger", "panic", "the guest kernel panicked: sysrq triggered crash"},
		{"vm poweroff", "vm", powerOff, "poweroff", "the guest powered itself off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := d.create("--runtime", tt.runtime, "--memory", "128")
			if tt.runtime == "gvisor" {
				sentryFirstForOOM(t, id)
			}
			start := time.Now()
			_, errs, code := d.cli("", "exec", id, "--", "sh", "-c", tt.script)
			if code == 0 || !strings.Contains(errs, "the sandbox ended ("+tt.reason+"): "+tt.detail) {
				t.Errorf("exec: exit %d, stderr %q; want the sandbox's end (%s: %s)", code, errs, tt.reason, tt.detail)
			}
			out, errs, code := d.cli("", "wait", id)
			took := time.Since(start)
			if code != 137 || strings.TrimSpace(out) != "137" || !strings.Contains(errs, "end reason: "+tt.reason+": "+tt.detail) {
				t.Errorf("wait: exit %d, %q %q; want 137 and end reason %s: %s", code, out, errs, tt.reason, tt.detail)
			}
			// The agent's loss is seen at once; naming the cause takes a
			// runtime status and a file read (TCG guests are slow to die,
			// and on a loaded CI host a gVisor OOM end took 10 s to name).
			// A bound on a stuck watcher, not a measure.
			if took > 30*time.Second {
				t.Errorf("the end took %s to be named", took)
			}
			evs, err := d.client.Events(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range evs {
				found = found || e.Kind == tt.reason && strings.Contains(e.Message, tt.detail)
			}
			if !found {
				t.Errorf("no %s event naming %q in %+v", tt.reason, tt.detail, evs)
			}
			t.Logf("%s: ended as %s after %s", tt.name, tt.reason, took.Round(time.Millisecond))
		})
	}
}

// sentryFirstForOOM makes gVisor sandbox id's Sentry the host OOM
// killer's certain first choice, so that the whole sandbox ends: the
// Sentry's oom_score_adj to 1000, every other process's (stubs, the
// factory later processes inherit theirs from, the gofer) back to 0.
func sentryFirstForOOM(t *testing.T, id string) {
	t.Helper()
	pids, err := cgroups.Procs("/corral/" + id)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, pid := range pids {
		p := "/proc/" + strconv.Itoa(pid)
		adj := "0"
		if b, err := os.ReadFile(p + "/cmdline"); err == nil && strings.HasPrefix(string(b), "runsc-sandbox") {
			adj, found = "1000", true
		}
		if err := os.WriteFile(p+"/oom_score_adj", []byte(adj), 0); err != nil && !os.IsNotExist(err) {
			t.Fatalf("oom_score_adj of %d: %v", pid, err)
		}
	}
	if !found {
		t.Fatalf("no runsc-sandbox process in the cgroup of %s (%v)", id, pids)
	}
}

// A process killed for memory in a sandbox that lives on is named: exit
// 137, "killed: out of memory" from the CLI, and an oom event; the
// sandbox runs on. gVisor: the host kills the process's stub in the
// sandbox's cgroup; vm: the guest kernel's OOM killer (the agent sees its
// count grow).
func TestOOMKilledProcess(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range []string{"gvisor", "vm"} {
		t.Run(rt, func(t *testing.T) {
			id := d.create("--runtime", rt, "--memory", "128")
			cmds := [][]string{{"sh", "-c", grow}, {"python3", "-c", "a = []\nwhile True: a.append(bytearray(16 << 20))"}}
			if rt == "gvisor" {
				// One allocation the Sentry fills (a vm's kernel refuses it:
				// MemoryError).
				cmds = append(cmds, []string{"python3", "-c", "a = bytearray(400 << 20)"})
			}
			for _, cmd := range cmds {
				_, errs, code := d.cli("", "exec", id, "--", cmd[0], cmd[1], cmd[2])
				if code != 137 || !strings.Contains(errs, "corral: killed: out of memory (the sandbox's memory limit is 128 MiB)") {
					t.Errorf("%s: exit %d, stderr %q; want 137 and killed: out of memory", cmd[0], code, errs)
				}
			}
			if out := d.mustCLI("exec", id, "--", "echo", "alive"); out != "alive\n" {
				t.Errorf("after the OOM kill: %q", out)
			}
			evs, err := d.client.Events(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range evs {
				if e.Kind == "oom" {
					n++
				}
			}
			if n == 0 {
				t.Errorf("no oom event in %+v", evs)
			}
		})
	}
}
