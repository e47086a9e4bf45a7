package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

func TestEntrypointTimeoutAndKill(t *testing.T) {
	t.Parallel()
	d := startDaemon(t) // one daemon serves both runtimes
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testEntrypointTimeoutAndKill(t, d, rt) })
	}
}

func testEntrypointTimeoutAndKill(t *testing.T, d *daemon, rt string) {
	tests := []struct {
		name     string
		args     []string
		rm       bool
		wantCode string
		// gvisorOnly: the case tests nothing of the runtime that another
		// case does not (the daemon's idle check is the same for both,
		// and it ends the sandbox as the timeout case does), so it boots
		// no vm.
		gvisorOnly bool
	}{
		{"entrypoint exit code", []string{"--entrypoint", "echo from-entrypoint; echo err-line >&2; exit 3"}, false, "3", false},
		{"timeout", []string{"--timeout", "2s"}, false, "124", false},
		{"idle timeout", []string{"--idle-timeout", "2s"}, false, "124", true},
		{"killed", []string{"--entrypoint", "sleep 600"}, true, "137", false},
	}
	var logged string // the exit code case's sandbox, whose log is checked below
	for _, tt := range tests {
		if tt.gvisorOnly && rt != "gvisor" {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			id := d.create(append([]string{"--runtime", rt}, tt.args...)...)
			if tt.wantCode == "3" {
				logged = id
			}
			if tt.rm {
				d.mustCLI("rm", id)
			}
			out, _, _ := d.cli("", "wait", id)
			if strings.TrimSpace(out) != tt.wantCode {
				t.Fatalf("wait printed %q, want %s", out, tt.wantCode)
			}
			d.assertNoLeaks(t, []string{id})
		})
	}
	// The entrypoint's output is the sandbox's log.
	id := logged
	if out := d.mustCLI("logs", id); !strings.Contains(out, "from-entrypoint") || !strings.Contains(out, "err-line") {
		t.Errorf("logs: %q", out)
	}
	if out := d.mustCLI("events", id); !strings.Contains(out, "terminated") {
		t.Errorf("events lack the termination: %q", out)
	}
}

func TestCreateRemoveLoopLeavesNothing(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	var ids []string
	for i := 0; i < 20; i++ {
		id := d.create()
		if out := d.mustCLI("exec", id, "--", "echo", "ok"); out != "ok\n" {
			t.Fatalf("sandbox %d: echo printed %q", i, out)
		}
		d.mustCLI("rm", id)
		ids = append(ids, id)
	}
	d.assertNoLeaks(t, ids)
}

func TestInspectAndList(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create("--name", "box1", "--tag", "team=infra", "--cpu", "0.5", "--cpu-limit", "1", "--memory", "128", "--memory-limit", "256", "--env", "GREETING=hi", "--workdir", "/tmp")
	var sb apiv1.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil {
		t.Fatal(err)
	}
	if sb.State != "running" || sb.Name != "box1" || sb.Tags["team"] != "infra" || sb.MemoryLimitMB != 256 || sb.CPULimit != 1 {
		t.Errorf("inspect: %+v", sb)
	}
	if out := d.mustCLI("exec", id, "--", "sh", "-c", "echo $GREETING; pwd"); out != "hi\n/tmp\n" {
		t.Errorf("env/workdir: %q", out)
	}
	var list []apiv1.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("ls", "--json")), &list); err != nil || len(list) != 1 || list[0].ID != id {
		t.Errorf("ls --json: %v %+v", err, list)
	}
}

// After kill -9 of the daemon and a restart, every sandbox is either running
// and usable or terminated, and nothing leaks.
func TestDaemonKill9Recovery(t *testing.T) {
	t.Parallel()
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testDaemonKill9Recovery(t, rt) })
	}
}

func testDaemonKill9Recovery(t *testing.T, rt string) {
	d := startDaemon(t)
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, d.create("--runtime", rt))
	}
	d.mustCLI("exec", ids[0], "--", "sh", "-c", "echo kept > /root/state")
	d.kill9()
	d.start()
	var list []apiv1.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("ls", "--json", "--all")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("after restart ls shows %d sandboxes, want 3", len(list))
	}
	for _, sb := range list {
		switch sb.State {
		case "running":
			if out := d.mustCLI("exec", sb.ID, "--", "echo", "alive"); out != "alive\n" {
				t.Errorf("%s: adopted sandbox not usable: %q", sb.ID, out)
			}
		case "terminated":
			d.assertNoLeaks(t, []string{sb.ID})
		default:
			t.Errorf("%s: state %s after restart", sb.ID, sb.State)
		}
	}
	if out, _, _ := d.cli("", "exec", ids[0], "--", "cat", "/root/state"); out != "kept\n" {
		t.Errorf("adopted sandbox lost its files: %q", out)
	}
	for _, id := range ids {
		d.cli("", "rm", id)
	}
	d.assertNoLeaks(t, ids)
}

func TestPTYShell(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := d.client.Exec(ctx, id, apiv1.ExecRequest{Cmd: []string{"/bin/sh"}, Stdin: true, PTY: &apiv1.PTYSize{Cols: 80, Rows: 24}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := d.client.Resize(ctx, id, s.PID(), 132, 43); err != nil {
		t.Fatal(err)
	}
	go d.client.Stdin(ctx, id, s.PID(), strings.NewReader("tty; stty size; exit 5\n"), false)
	var out strings.Builder
	res, err := s.Copy(&out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 5 || !strings.Contains(out.String(), "/dev/pts/") || !strings.Contains(out.String(), "43 132") {
		t.Errorf("pty session: exit %d, output %q", res.ExitCode, out.String())
	}
}

// A background process can be listed and re-attached to.
func TestBackgroundProcessAttach(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create()
	pid := strings.TrimSpace(d.mustCLI("exec", "-d", id, "--", "sh", "-c", "echo early; sleep 1; echo late; exit 4"))
	if out := d.mustCLI("ps", id); !strings.Contains(out, pid) || !strings.Contains(out, "sleep 1") {
		t.Fatalf("ps does not show pid %s:\n%s", pid, out)
	}
	out, _, code := d.cli("", "attach", id, pid)
	if code != 4 || !strings.Contains(out, "late") {
		t.Errorf("attach: exit %d, output %q", code, out)
	}
}
