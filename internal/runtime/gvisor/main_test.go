package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/cgroups"
	"corral/internal/ids"
	"corral/internal/mountinfo"
	"corral/internal/runtime"
	"corral/internal/runtime/runtimetest"
)

// The suite runs real runsc on a real root filesystem. It needs root, runsc
// (CORRAL_RUNSC or /var/lib/corral/bin/runsc) and a base rootfs with
// python3 (CORRAL_BASE_ROOTFS or /var/lib/corral/rootfs/debian-bookworm),
// both of which scripts/deps.sh installs; it skips without them.
var env struct {
	skip     string // why the privileged tests skip, if they do
	runsc    string
	rootfs   string
	agent    string // the fake agent, built by TestMain
	base     string // temp dir holding runsc root and sandbox dirs
	cgParent string // cgroup parent of every test sandbox
}

func TestMain(m *testing.M) {
	code := func() int {
		cleanup, err := setup()
		if err != nil {
			fmt.Fprintln(os.Stderr, "gvisor tests: setup:", err)
			return 1
		}
		defer cleanup()
		return m.Run()
	}()
	os.Exit(code)
}

// setup finds runsc and the rootfs, builds the fake agent and creates the
// test's runsc root and cgroup parent. It returns what undoes it.
func setup() (func(), error) {
	env.runsc = getenv("CORRAL_RUNSC", "/var/lib/corral/bin/runsc")
	env.rootfs = getenv("CORRAL_BASE_ROOTFS", "/var/lib/corral/rootfs/debian-bookworm")
	switch {
	case os.Geteuid() != 0:
		env.skip = "needs root to run runsc"
	case !isFile(env.runsc):
		env.skip = fmt.Sprintf("no runsc at %s (set CORRAL_RUNSC or run scripts/deps.sh)", env.runsc)
	case !isFile(filepath.Join(env.rootfs, "usr/bin/python3")):
		env.skip = fmt.Sprintf("no base rootfs with python3 at %s (set CORRAL_BASE_ROOTFS or run scripts/deps.sh)", env.rootfs)
	}
	if env.skip != "" {
		return func() {}, nil
	}
	// A crashed run's sandboxes, cgroups and mounts are swept first.
	scratch, err := runtimetest.NewScratch("corral-gvisor-test")
	if err != nil {
		return nil, err
	}
	base := scratch.Dir
	env.base, env.cgParent = base, scratch.Cgroup
	undo := func() {
		// runsc pins its null network namespace in its root with a bind
		// mount; unmount it (and anything else) before removing.
		_ = mountinfo.UnmountUnder(base)
		_ = os.RemoveAll(base)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cgroups.Remove(ctx, env.cgParent); err != nil {
			fmt.Fprintln(os.Stderr, "gvisor tests: removing cgroup parent:", err)
		}
	}
	env.agent = filepath.Join(base, "fakeagent")
	build := exec.Command("go", "build", "-o", env.agent, "./testdata/fakeagent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		undo()
		return nil, fmt.Errorf("building fake agent: %v\n%s", err, out)
	}
	return undo, nil
}

func getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// newRuntime returns a Runtime on the test's runsc root, or skips.
func newRuntime(t testing.TB) *Runtime {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	r, err := New(Config{
		RunscPath:    env.runsc,
		Root:         filepath.Join(env.base, "runsc"),
		CgroupParent: env.cgParent,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// newRef names a fresh sandbox under the test's base directory.
func newRef() runtime.Ref {
	id := ids.NewSandbox()
	return runtime.Ref{ID: id, Dir: filepath.Join(env.base, "sandboxes", id)}
}

// start starts a sandbox with res and destroys it when the test ends.
func start(t testing.TB, r *Runtime, res runtime.Resources) runtime.Ref {
	t.Helper()
	ref := newRef()
	p := runtime.StartParams{
		Ref: ref, RootFS: env.rootfs, AgentBinary: env.agent,
		Env: []string{"CORRAL_TEST=1"}, Resources: res, Hostname: "box-" + ref.ID,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := r.Start(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Destroy(context.Background(), ref); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ref
}

// sh runs cmd in the sandbox through the fake agent and returns its output.
func sh(t testing.TB, r *Runtime, ref runtime.Ref, cmd string) string {
	t.Helper()
	out, err := trySh(r, ref, cmd, 30*time.Second)
	if err != nil {
		t.Fatalf("running %q in %s: %v (output %q)", cmd, ref.ID, err, out)
	}
	return out
}

func trySh(r *Runtime, ref runtime.Ref, cmd string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := r.Dial(ctx, ref)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", err
	}
	out, err := io.ReadAll(conn)
	return string(out), err
}

// leaks is what a sandbox can leave on the host.
type leaks struct {
	procs   []string // runsc processes of the test's runsc root
	mounts  []string // mounts under the test's sandbox directories
	cgroups []string // cgroup directories under the test's cgroup parent
}

// snapshot records the host resources the test's sandboxes may hold.
func snapshot(t testing.TB) leaks {
	t.Helper()
	var l leaks
	root := []byte(filepath.Join(env.base, "runsc"))
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, root) && !bytes.HasPrefix(b, []byte("go")) {
			if _, st, ok := procStat(atoi(e.Name())); ok && st != "Z" {
				l.procs = append(l.procs, e.Name()+" "+strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
	}
	m, err := mountinfo.Under(filepath.Join(env.base, "sandboxes"))
	if err != nil {
		t.Fatal(err)
	}
	l.mounts = m
	dirs, err := cgroups.Dirs(env.cgParent)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		sub, _ := os.ReadDir(d)
		for _, s := range sub {
			if s.IsDir() {
				l.cgroups = append(l.cgroups, filepath.Join(d, s.Name()))
			}
		}
	}
	return l
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// checkNoLeaks fails t if anything in after is not in before.
func checkNoLeaks(t testing.TB, before, after leaks) {
	t.Helper()
	for _, c := range []struct {
		what          string
		before, after []string
	}{
		{"processes", before.procs, after.procs},
		{"mounts", before.mounts, after.mounts},
		{"cgroups", before.cgroups, after.cgroups},
	} {
		for _, x := range c.after {
			if !slices.Contains(c.before, x) {
				t.Errorf("leaked %s: %s", c.what, x)
			}
		}
	}
}

// mountTmpfs mounts a small tmpfs at p.
func mountTmpfs(p string) error {
	return unix.Mount("tmpfs", p, "tmpfs", 0, "size=1m")
}
