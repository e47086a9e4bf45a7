package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/cgroups"
	"corral/internal/errdefs"
	"corral/internal/runtime"
	"corral/internal/testwait"
)

func TestStartDialEcho(t *testing.T) {
	r := newRuntime(t)
	ref := start(t, r, runtime.Resources{})
	out := sh(t, r, ref, `echo hello; id -u; hostname; echo $CORRAL_TEST; echo $PATH; tr '\0' ' ' </proc/1/cmdline`)
	want := "hello\n0\nbox-" + ref.ID + "\n1\n" + strings.TrimPrefix(defaultPath, "PATH=") +
		"\n/.corral/corral agent --listen unix:/.corral/run/agent.sock "
	if out != want {
		t.Errorf("sandbox said %q, want %q", out, want)
	}
	// The agent binary is read-only; the network is loopback only.
	out = sh(t, r, ref, `echo x > /.corral/corral && echo writable; cat /proc/net/dev`)
	if strings.Contains(out, "writable") || !strings.Contains(out, "lo") || strings.Contains(out, "eth") {
		t.Errorf("agent binary writable or unexpected network devices: %q", out)
	}
	if st, err := r.Status(context.Background(), ref); err != nil || st != runtime.StateRunning {
		t.Errorf("Status = %v, %v; want running", st, err)
	}
	ids, err := r.List(context.Background())
	if err != nil || !slices.Contains(ids, ref.ID) {
		t.Errorf("List = %v, %v; want it to hold %s", ids, err, ref.ID)
	}
	v, err := r.Version(context.Background())
	if err != nil || v == "" {
		t.Errorf("Version = %q, %v", v, err)
	}
	t.Logf("runsc %s", v)
}

func TestPrivateWritableLayer(t *testing.T) {
	r := newRuntime(t)
	a := start(t, r, runtime.Resources{})
	b := start(t, r, runtime.Resources{})
	out := sh(t, r, a, `echo secret > /etc/corral-test && echo tmp > /tmp/corral-test && cat /etc/corral-test /tmp/corral-test`)
	if out != "secret\ntmp\n" {
		t.Fatalf("writing in sandbox a: %q", out)
	}
	for _, p := range []string{"etc/corral-test", "tmp/corral-test"} {
		if _, err := os.Lstat(filepath.Join(env.rootfs, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("write in a sandbox reached the base rootfs: %s: %v", p, err)
		}
	}
	if out := sh(t, r, b, `cat /etc/corral-test /tmp/corral-test 2>&1 || echo absent`); !strings.HasSuffix(out, "absent\n") {
		t.Errorf("sandbox b sees a's files: %q", out)
	}
}

func TestMemoryLimit(t *testing.T) {
	r := newRuntime(t)
	ref := start(t, r, runtime.Resources{MemoryLimitMB: 256})
	out, err := trySh(r, ref, `python3 -c 'b = bytearray(600 << 20); print("allocated", len(b))'`, 60*time.Second)
	t.Logf("600 MB allocation under 256 MiB: %q, %v", out, err)
	if strings.Contains(out, "allocated") {
		t.Fatalf("allocation of 600 MB succeeded under a 256 MiB limit: %q", out)
	}
	// gVisor has no guest OOM killer: the host's kills the sandbox (or
	// the allocation fails inside it). Status must tell which, once the
	// killed sandbox has finished dying.
	var st runtime.State
	testwait.For(t, 5*time.Second, "Status after OOM to agree with whether the agent answers", func() bool {
		var err error
		if st, err = r.Status(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		_, agentErr := trySh(r, ref, "true", time.Second)
		return (agentErr == nil) == (st == runtime.StateRunning)
	})
	t.Logf("sandbox after OOM: %s", st)
	// The runtime survives: a new sandbox starts and answers.
	other := start(t, r, runtime.Resources{})
	if out := sh(t, r, other, "echo alive"); out != "alive\n" {
		t.Errorf("second sandbox: %q", out)
	}
}

func TestPidsLimit(t *testing.T) {
	r := newRuntime(t)
	const limit = 256
	ref := start(t, r, runtime.Resources{PidsLimit: limit, MemoryLimitMB: 512})
	dir, err := cgroups.Dir(r.cgroup(ref.ID), "pids")
	if err != nil {
		t.Fatal(err)
	}
	max := "pids.max"
	if got := readTrim(t, filepath.Join(dir, max)); got != strconv.Itoa(limit) {
		t.Fatalf("%s = %q, want %d", max, got, limit)
	}
	// The pids limit counts the sandbox's host tasks (sentry threads,
	// systrap stubs). A fork bomb runs into it; gVisor may then end the
	// whole sandbox, which is containment too.
	if out, err := trySh(r, ref, `sh -c 'f(){ f|f& }; f' >/dev/null 2>&1 </dev/null; echo started`, 10*time.Second); err != nil || out != "started\n" {
		t.Fatalf("starting fork bomb: %q, %v", out, err)
	}
	// It runs into the limit: pids.events counts the forks refused. The
	// count stays within the limit meanwhile, and at its peak where the
	// kernel keeps one (pids.peak, Linux 6.13 on).
	testwait.For(t, 10*time.Second, "the fork bomb to run into the pids limit", func() bool {
		if b, err := os.ReadFile(filepath.Join(dir, "pids.current")); err == nil {
			if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n > limit {
				t.Fatalf("pids.current = %d above limit %d", n, limit)
			}
		}
		b, _ := os.ReadFile(filepath.Join(dir, "pids.events"))
		for line := range strings.Lines(string(b)) {
			if n, ok := strings.CutPrefix(strings.TrimSpace(line), "max "); ok && n != "0" {
				return true
			}
		}
		return false
	})
	if b, err := os.ReadFile(filepath.Join(dir, "pids.peak")); err == nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n > limit {
			t.Fatalf("pids.peak = %d above limit %d", n, limit)
		}
	}
	other := start(t, r, runtime.Resources{})
	if out := sh(t, r, other, "echo alive"); out != "alive\n" {
		t.Errorf("second sandbox: %q", out)
	}
	st, err := r.Status(context.Background(), ref)
	t.Logf("fork-bombed sandbox is %s (%v)", st, err)
}

func TestResourcesInCgroup(t *testing.T) {
	r := newRuntime(t)
	ref := start(t, r, runtime.Resources{CPURequestMilli: 250, CPULimitMilli: 500, MemoryLimitMB: 300, MemoryRequestMB: 100, PidsLimit: 1000})
	g := r.cgroup(ref.ID)
	want := map[string][2]string{ // controller -> file, value
		"cpu quota":  {"cpu", "cpu.cfs_quota_us=50000"},
		"cpu period": {"cpu", "cpu.cfs_period_us=100000"},
		"cpu shares": {"cpu", "cpu.shares=256"},
		"memory":     {"memory", "memory.limit_in_bytes=" + strconv.Itoa(300<<20)},
		"swap":       {"memory", "memory.memsw.limit_in_bytes=" + strconv.Itoa(300<<20)},
		"soft":       {"memory", "memory.soft_limit_in_bytes=" + strconv.Itoa(100<<20)},
		"pids":       {"pids", "pids.max=1000"},
	}
	if cgroups.Detect() == cgroups.V2 {
		want = map[string][2]string{
			"cpu max":  {"cpu", "cpu.max=50000 100000"},
			"memory":   {"memory", "memory.max=" + strconv.Itoa(300<<20)},
			"swap":     {"memory", "memory.swap.max=0"},
			"pids":     {"pids", "pids.max=1000"},
			"mem low":  {"memory", "memory.low=" + strconv.Itoa(100<<20)},
			"cpu prio": {"cpu", "cpu.weight"},
		}
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			file, value, _ := strings.Cut(w[1], "=")
			dir, err := cgroups.Dir(g, w[0])
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, file)
			if _, err := os.Stat(p); err != nil {
				t.Skipf("%s: %v", p, err)
			}
			if got := readTrim(t, p); value != "" && got != value {
				t.Errorf("%s = %q, want %q", p, got, value)
			}
		})
	}
	u, err := cgroups.ReadUsage(g)
	if err != nil || u.MemoryBytes == 0 || u.Pids == 0 {
		t.Errorf("ReadUsage = %+v, %v", u, err)
	}
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestDestroyLeavesNothing(t *testing.T) {
	r := newRuntime(t)
	before := snapshot(t)
	ref := start(t, r, runtime.Resources{MemoryLimitMB: 256, PidsLimit: 500, CPULimitMilli: 1000})
	sh(t, r, ref, "sleep 1000 >/dev/null 2>&1 & echo started")
	procs, complete := r.stateProcs(ref.ID)
	if len(procs) != 2 || !complete {
		t.Errorf("runsc state names %d running processes (complete %v), want sandbox and gofer", len(procs), complete)
	}
	t0 := time.Now()
	if err := r.Destroy(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	t.Logf("destroy took %v", time.Since(t0))
	for _, p := range procs {
		if p.alive() {
			t.Errorf("process %d outlived Destroy", p.pid)
		}
	}
	if ok, err := cgroups.Exists(r.cgroup(ref.ID)); ok || err != nil {
		t.Errorf("cgroup %s still exists (%v)", r.cgroup(ref.ID), err)
	}
	if _, err := os.Lstat(ref.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox directory still exists: %v", err)
	}
	if files, _ := r.stateFiles(ref.ID); len(files) > 0 {
		t.Errorf("runsc state left: %v", files)
	}
	checkNoLeaks(t, before, snapshot(t))
	if st, err := r.Status(context.Background(), ref); err != nil || st != runtime.StateAbsent {
		t.Errorf("Status after Destroy = %v, %v; want absent", st, err)
	}
	if err := r.Destroy(context.Background(), ref); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
}

func TestDestroyWithoutRunscState(t *testing.T) {
	r := newRuntime(t)
	// A sandbox whose Start never reached runsc create: a bare directory,
	// with a mount left in it for good measure.
	ref := newRef()
	if err := os.MkdirAll(filepath.Join(ref.Dir, chanDirName), 0o700); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(ref.Dir, upperDirName)
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := mountTmpfs(mnt); err != nil {
		t.Fatal(err)
	}
	if err := cgroups.Create(r.cgroup(ref.ID)); err != nil {
		t.Fatal(err)
	}
	if err := r.Destroy(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ref.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox directory still exists: %v", err)
	}
	if ok, _ := cgroups.Exists(r.cgroup(ref.ID)); ok {
		t.Errorf("cgroup left")
	}
	// Nothing at all: fine too.
	if err := r.Destroy(context.Background(), newRef()); err != nil {
		t.Errorf("Destroy of an unknown sandbox: %v", err)
	}
}

func TestStartFailureRollsBack(t *testing.T) {
	r := newRuntime(t)
	before := snapshot(t)
	// A platform that cannot start here makes runsc run fail after it
	// has made its cgroup and state.
	bad, err := New(Config{RunscPath: r.cfg.RunscPath, Root: r.cfg.Root, CgroupParent: r.cfg.CgroupParent,
		Platform: "no-such-platform", Logger: r.log})
	if err != nil {
		t.Fatal(err)
	}
	ref := newRef()
	err = bad.Start(context.Background(), runtime.StartParams{Ref: ref, RootFS: env.rootfs, AgentBinary: env.agent})
	t.Logf("start error: %v", err)
	if err == nil || !strings.Contains(err.Error(), "starting sandbox "+ref.ID+": runsc run: ") {
		t.Fatalf("Start with a bad platform: %v", err)
	}
	if !strings.Contains(err.Error(), "no-such-platform") {
		t.Errorf("error does not carry runsc's message: %v", err)
	}
	if _, err := os.Lstat(ref.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed Start left its directory: %v", err)
	}
	checkNoLeaks(t, before, snapshot(t))

	// Bad parameters are invalid arguments and touch nothing.
	for name, p := range map[string]runtime.StartParams{
		"id":     {Ref: runtime.Ref{ID: "../x", Dir: ref.Dir}, RootFS: env.rootfs, AgentBinary: env.agent},
		"dir":    {Ref: runtime.Ref{ID: ref.ID, Dir: "rel"}, RootFS: env.rootfs, AgentBinary: env.agent},
		"rootfs": {Ref: ref, RootFS: "/nonexistent", AgentBinary: env.agent},
		"agent":  {Ref: ref, RootFS: env.rootfs, AgentBinary: "/nonexistent"},
	} {
		if err := r.Start(context.Background(), p); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: Start = %v, want invalid argument", name, err)
		}
	}
	// Starting an id twice is refused and leaves the first one running.
	ok := start(t, r, runtime.Resources{})
	err = r.Start(context.Background(), runtime.StartParams{Ref: ok, RootFS: env.rootfs, AgentBinary: env.agent})
	if !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("second Start of %s = %v, want already exists", ok.ID, err)
	}
	if out := sh(t, r, ok, "echo still"); out != "still\n" {
		t.Errorf("first sandbox after refused Start: %q", out)
	}
}

func TestDialUnavailable(t *testing.T) {
	r := newRuntime(t)
	ref := newRef()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.Dial(ctx, ref); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Dial of a missing sandbox = %v, want unavailable", err)
	}
}

// TestDialRefusesSymlink: the channel directory is the guest's; a symlink
// it plants must not lead the daemon to another host socket.
func TestDialRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "host.sock")
	l, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := filepath.Join(dir, "sb", chanDirName)
	if err := os.MkdirAll(ch, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(ch, agentSocket)); err != nil {
		t.Fatal(err)
	}
	r := &Runtime{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if c, err := r.Dial(ctx, runtime.Ref{ID: "sb-aaaaaaaaaaaaaaaa", Dir: filepath.Join(dir, "sb")}); err == nil {
		c.Close()
		t.Fatal("Dial followed a symlink to a host socket")
	}
	// A real socket at a path longer than sun_path still works.
	long := filepath.Join(dir, strings.Repeat("d", 120))
	if err := os.MkdirAll(filepath.Join(long, chanDirName), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, filepath.Join(long, chanDirName, agentSocket)); err != nil {
		t.Fatal(err)
	}
	c, err := r.Dial(context.Background(), runtime.Ref{ID: "sb-aaaaaaaaaaaaaaaa", Dir: long})
	if err != nil {
		t.Fatalf("Dial at a %d-byte path: %v", len(long), err)
	}
	c.Close()
}

func TestStartDestroyCycles(t *testing.T) {
	r := newRuntime(t)
	before := snapshot(t)
	const n = 20
	var startT, destroyT time.Duration
	for i := 0; i < n; i++ {
		ref := newRef()
		t0 := time.Now()
		err := r.Start(context.Background(), runtime.StartParams{Ref: ref, RootFS: env.rootfs, AgentBinary: env.agent,
			Resources: runtime.Resources{MemoryLimitMB: 256, PidsLimit: 1024}})
		if err != nil {
			t.Fatal(err)
		}
		startT += time.Since(t0)
		if out := sh(t, r, ref, "echo "+strconv.Itoa(i)); out != strconv.Itoa(i)+"\n" {
			t.Errorf("cycle %d: %q", i, out)
		}
		t0 = time.Now()
		if err := r.Destroy(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		destroyT += time.Since(t0)
	}
	t.Logf("%d cycles: start %v, destroy %v on average", n, startT/n, destroyT/n)
	checkNoLeaks(t, before, snapshot(t))
	entries, _ := os.ReadDir(r.cfg.Root)
	for _, e := range entries {
		if e.Name() != "null-netns" {
			t.Errorf("left in runsc root: %s", e.Name())
		}
	}
}

// TestReadOnlyRootFS starts a sandbox on a read-only bind mount of the base
// rootfs: Start and runsc must not write to the shared tree, and the guest
// still has a writable root.
func TestReadOnlyRootFS(t *testing.T) {
	r := newRuntime(t)
	ro := filepath.Join(env.base, "ro-rootfs")
	if err := os.MkdirAll(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(env.rootfs, ro, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(ro, unix.MNT_DETACH)
	if err := unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	ref := newRef()
	err := r.Start(context.Background(), runtime.StartParams{Ref: ref, RootFS: ro, AgentBinary: env.agent})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Destroy(context.Background(), ref); err != nil {
			t.Error(err)
		}
	}()
	if out := sh(t, r, ref, "echo w > /w && mkdir -p /usr/x && cat /w"); out != "w\n" {
		t.Errorf("writing on a read-only base: %q", out)
	}
}

func TestRootFSWithoutMountPoints(t *testing.T) {
	r := newRuntime(t)
	bare := t.TempDir()
	ref := newRef()
	p := runtime.StartParams{Ref: ref, RootFS: bare, AgentBinary: env.agent}
	if err := r.Start(context.Background(), p); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Start on a rootfs without mount points = %v, want failed precondition", err)
	}
	if _, err := os.Lstat(ref.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused Start made its directory: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := PrepareRootFS(bare); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkRootFS(bare); err != nil {
		t.Errorf("after PrepareRootFS: %v", err)
	}
}

func TestDebugLog(t *testing.T) {
	r := newRuntime(t)
	r.cfg.Debug = true
	ref := start(t, r, runtime.Resources{})
	sh(t, r, ref, "true")
	fi, err := os.Stat(filepath.Join(ref.Dir, "runsc.log"))
	if err != nil || fi.Size() == 0 {
		t.Errorf("runsc.log with Debug: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(ref.Dir, consoleLog))
	if err != nil || !strings.Contains(string(b), "fakeagent listening") {
		t.Errorf("console.log does not hold PID 1's output: %q, %v", b, err)
	}
}

// TestStartCancelled cancels Start at points inside runsc run:
// whatever stage it reached, nothing may be left behind.
func TestStartCancelled(t *testing.T) {
	r := newRuntime(t)
	before := snapshot(t)
	for _, d := range []time.Duration{0, 10 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 120 * time.Millisecond} {
		ref := newRef()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		err := r.Start(ctx, runtime.StartParams{Ref: ref, RootFS: env.rootfs, AgentBinary: env.agent})
		cancel()
		t.Logf("cancelled after %v: %v", d, err)
		if err == nil {
			if err := r.Destroy(context.Background(), ref); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, serr := os.Lstat(ref.Dir); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("cancelled Start left its directory: %v", serr)
		}
		if st, err := r.Status(context.Background(), ref); err != nil || st != runtime.StateAbsent {
			t.Errorf("after cancelled Start: Status = %v, %v", st, err)
		}
	}
	checkNoLeaks(t, before, snapshot(t))
}

func TestConcurrentSandboxes(t *testing.T) {
	r := newRuntime(t)
	before := snapshot(t)
	const n = 4
	errc := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			ref := newRef()
			p := runtime.StartParams{Ref: ref, RootFS: env.rootfs, AgentBinary: env.agent}
			if err := r.Start(context.Background(), p); err != nil {
				errc <- err
				return
			}
			out, err := trySh(r, ref, "echo "+ref.ID, 30*time.Second)
			if err == nil && out != ref.ID+"\n" {
				err = errors.New("unexpected output " + out)
			}
			if derr := r.Destroy(context.Background(), ref); err == nil {
				err = derr
			}
			errc <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	checkNoLeaks(t, before, snapshot(t))
}

// A runsc run that never returns is ended at the start's deadline and the
// sandbox started again: here a runsc whose first run hangs (a stand-in
// that sleeps), then the real one.
func TestStartHungRunsAgain(t *testing.T) {
	r := newRuntime(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "hung-once")
	script := filepath.Join(dir, "runsc")
	body := fmt.Sprintf("#!/bin/sh\ncase \" $* \" in *\" run \"*) if [ ! -e %[1]s ]; then : > %[1]s; exec sleep 600; fi;; esac\nexec %[2]s \"$@\"\n",
		marker, r.cfg.RunscPath)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	hung, err := New(Config{RunscPath: script, Root: r.cfg.Root, CgroupParent: r.cfg.CgroupParent,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), nil))})
	if err != nil {
		t.Fatal(err)
	}
	hung.startTimeout = 2 * time.Second
	before := snapshot(t)
	ref := newRef()
	if err := hung.Start(context.Background(), runtime.StartParams{Ref: ref, RootFS: env.rootfs, AgentBinary: env.agent}); err != nil {
		t.Fatalf("Start after a hung run: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the first run did not hang: %v", err)
	}
	if !strings.Contains(logs.String(), "runsc run hung; starting again") {
		t.Errorf("no warning of the hung run in the log:\n%s", logs.String())
	}
	if out := sh(t, r, ref, "echo up"); out != "up\n" {
		t.Errorf("the restarted sandbox said %q", out)
	}
	if err := r.Destroy(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	checkNoLeaks(t, before, snapshot(t))
}
