package bench

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// raw drives runsc directly: the baseline.
type raw struct {
	cfg  Config
	root string // runsc --root
	dir  string
}

func newRaw(cfg Config) (*raw, error) {
	dir, err := os.MkdirTemp(cfg.WorkDir, "corral-bench-")
	if err != nil {
		return nil, err
	}
	r := &raw{cfg: cfg, dir: dir, root: filepath.Join(dir, "runsc")}
	return r, os.MkdirAll(r.root, 0o700)
}

func (r *raw) close() {
	_ = syscall.Unmount(filepath.Join(r.root, "null-netns"), syscall.MNT_DETACH)
	_ = os.RemoveAll(r.dir)
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer", "blkio", "systemd", ""} {
		_ = os.Remove(filepath.Join("/sys/fs/cgroup", c, "corral-bench"))
	}
}

// version names the runsc build: a go-installed runsc reports
// VERSION_MISSING itself, so read the module version it was built from.
func (r *raw) version() string {
	bi, err := buildinfo.ReadFile(r.cfg.RunscPath)
	if err != nil {
		return "unknown"
	}
	return bi.Path + "@" + bi.Main.Version
}

// runsc runs one runsc command with the same global flags Corral uses.
func (r *raw) runsc(ctx context.Context, upper string, args ...string) *exec.Cmd {
	global := []string{"--root", r.root, "--network", "none", "--platform", "systrap",
		"--host-uds", "create", "--overlay2", "root:dir=" + upper}
	return exec.CommandContext(ctx, r.cfg.RunscPath, append(global, args...)...)
}

// bundle writes an OCI bundle equivalent to a Corral sandbox's (same root,
// mounts, namespaces, a memory limit and cgroup) running args.
func (r *raw) bundle(id string, args []string) (string, string, error) {
	b := filepath.Join(r.dir, id)
	upper := filepath.Join(b, "upper")
	if err := os.MkdirAll(upper, 0o700); err != nil {
		return "", "", err
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"args": args, "cwd": "/", "user": map[string]int{"uid": 0, "gid": 0},
			"env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"root":     map[string]any{"path": r.cfg.RootFS},
		"hostname": id,
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
			{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777"}},
		},
		"linux": map[string]any{
			"namespaces":  []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}},
			"cgroupsPath": "/corral-bench/" + id,
			"resources":   map[string]any{"memory": map[string]int64{"limit": 512 << 20}, "cpu": map[string]any{"shares": 1024}},
		},
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return "", "", err
	}
	return b, upper, os.WriteFile(filepath.Join(b, "config.json"), js, 0o644)
}

// tti times `runsc run` of echo from start to its first output byte.
func (r *raw) tti(ctx context.Context, n int) (Result, error) {
	res := Result{Name: "raw tti"}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("raw-tti-%d", i)
		b, upper, err := r.bundle(id, []string{"echo", "hi"})
		if err != nil {
			return res, err
		}
		cmd := r.runsc(ctx, upper, "run", "--bundle", b, id)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return res, err
		}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return res, err
		}
		line, rerr := bufio.NewReader(out).ReadString('\n')
		d := time.Since(t0)
		werr := cmd.Wait()
		_ = r.runsc(ctx, upper, "delete", "--force", id).Run()
		if rerr != nil || strings.TrimSpace(line) != "hi" || werr != nil {
			return res, fmt.Errorf("runsc run echo: output %q, %v, %v", line, rerr, werr)
		}
		res.Samples = append(res.Samples, d)
	}
	return res, nil
}

// exec times `runsc exec` of echo in a detached container.
func (r *raw) exec(ctx context.Context, n int) (Result, error) {
	res := Result{Name: "raw exec"}
	id := "raw-exec"
	b, upper, err := r.bundle(id, []string{"sleep", "infinity"})
	if err != nil {
		return res, err
	}
	// The detached sandbox inherits runsc's stdio: give it none, or reading
	// runsc's output would wait for the sandbox to exit.
	if err := r.runsc(ctx, upper, "run", "--detach", "--bundle", b, id).Run(); err != nil {
		return res, fmt.Errorf("runsc run --detach: %v", err)
	}
	defer r.runsc(context.WithoutCancel(ctx), upper, "delete", "--force", id).Run()
	for i := 0; i < n+1; i++ {
		t0 := time.Now()
		out, err := r.runsc(ctx, upper, "exec", id, "echo", "hi").Output()
		d := time.Since(t0)
		if err != nil || strings.TrimSpace(string(out)) != "hi" {
			return res, fmt.Errorf("runsc exec echo: %q, %v", out, err)
		}
		if i > 0 {
			res.Samples = append(res.Samples, d)
		}
	}
	return res, nil
}
