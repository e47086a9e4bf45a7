package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/sdk/go/corral"
)

var (
	binary   string // the corral binary under test
	skipWhy  string // non-empty: why these tests cannot run here
	runscBin string
	rootfs   string
	vmKernel string // the vm runtime's guest kernel (deps.sh installs it)
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	runscBin = envOr("CORRAL_RUNSC", "/var/lib/corral/bin/runsc")
	rootfs = envOr("CORRAL_BASE_ROOTFS", "/var/lib/corral/rootfs/debian-bookworm")
	vmKernel = envOr("CORRAL_VM_KERNEL", "/var/lib/corral/vm/kernel/current")
	switch {
	case os.Geteuid() != 0:
		skipWhy = "needs root to create sandboxes (run scripts/test.sh as root)"
	case !exists(runscBin):
		skipWhy = "runsc not found at " + runscBin + " (scripts/deps.sh installs it)"
	case !exists(filepath.Join(rootfs, "bin/sh")):
		skipWhy = "base rootfs not found at " + rootfs + " (scripts/deps.sh builds it)"
	}
	if skipWhy != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "corral-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "corral")
	build := exec.Command("go", "build", "-o", binary, "corral/cmd/corral")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building corral: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// daemon is one `corral serve` process under test.
type daemon struct {
	t      testing.TB
	state  string
	addr   string
	envd   string   // the envd face's address (--envd-listen)
	net    []string // network flags, fixed for the daemon's life
	token  string
	cmd    *exec.Cmd
	log    *bytes.Buffer
	tee    io.Writer // also gets the daemon's output, when not nil
	client *corral.Client
	tls    bool // a cluster node: its listener serves TLS only (cluster_tls_test.go)
}

// startDaemon starts a daemon on a fresh state dir; it is stopped, and every
// sandbox it still has removed, when the test ends. extra are more serve
// flags.
func startDaemon(t testing.TB, extra ...string) *daemon {
	t.Helper()
	return startDaemonTee(t, nil, extra...)
}

// startDaemonTee is startDaemon with the daemon's output also written to
// tee (when not nil).
func startDaemonTee(t testing.TB, tee io.Writer, extra ...string) *daemon {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	state, err := os.MkdirTemp("", "corral-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	// No warm pool unless the test asks for one (a flag given later wins):
	// pools fill in the background, and most tests count sandboxes.
	// The envd face listens on a port of its own for each daemon (its
	// default, 49983, is one per host).
	envd := freeAddr(t)
	flags := append(testNetFlags(t), "--warm-pool", "0", "--envd-listen", envd)
	d := &daemon{t: t, state: state, addr: freeAddr(t), envd: envd, net: append(flags, extra...), tee: tee}
	d.start()
	t.Cleanup(func() { d.teardown() })
	return d
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (d *daemon) start() {
	d.t.Helper()
	d.log = &bytes.Buffer{}
	args := append([]string{"serve", "--listen", d.addr, "--state-dir", d.state,
		"--runsc", runscBin, "--base-rootfs", rootfs, "--vm-kernel", vmKernel, "--log-level", "debug"}, d.net...)
	d.cmd = exec.Command(binary, args...)
	var out io.Writer = d.log
	if d.tee != nil {
		out = io.MultiWriter(d.log, d.tee)
	}
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	// The API answers once the sandboxes of the state directory are
	// reconciled, and one whose agent does not answer is given the agent
	// timeout (30 s) before it is ended: the wait must outlast it.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := d.httpClient().Get(d.base() + "/v1/health")
		if err == nil {
			resp.Body.Close()
			tok, err := os.ReadFile(filepath.Join(d.state, "token"))
			if err != nil {
				d.t.Fatal(err)
			}
			d.token = strings.TrimSpace(string(tok))
			d.client = corral.New(d.base(), d.token)
			d.client.HTTP = d.httpClient()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.t.Fatalf("daemon did not come up:\n%s", d.log)
}

// kill9 kills the daemon the hard way (its sandboxes keep running).
func (d *daemon) kill9() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = d.cmd.Process.Wait()
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = d.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		d.kill9()
	}
}

func (d *daemon) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if sbs, err := d.client.List(ctx, ""); err == nil {
		for _, sb := range sbs {
			if sb.State != "terminated" && sb.State != "failed" {
				if _, err := d.client.Terminate(ctx, sb.ID); err != nil {
					d.t.Errorf("teardown: removing %s: %v", sb.ID, err)
				}
			}
		}
	}
	d.stop()
	if d.t.Failed() {
		d.t.Logf("daemon log:\n%s", d.log)
	}
	_ = syscall.Unmount(filepath.Join(d.state, "runsc", "null-netns"), syscall.MNT_DETACH)
	_ = os.RemoveAll(d.state)
}

// cli runs the corral CLI against this daemon with stdin and returns
// stdout, stderr and the exit code.
func (d *daemon) cli(stdin string, args ...string) (string, string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "CORRAL_URL=http://"+d.addr, "CORRAL_TOKEN="+d.token)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			d.t.Fatalf("corral %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// mustCLI is cli that fails the test on a non-zero exit.
func (d *daemon) mustCLI(args ...string) string {
	d.t.Helper()
	out, errs, code := d.cli("", args...)
	if code != 0 {
		d.t.Fatalf("corral %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errs)
	}
	return out
}

// create makes a sandbox through the CLI and returns its id.
func (d *daemon) create(args ...string) string {
	d.t.Helper()
	return strings.TrimSpace(d.mustCLI(append([]string{"create"}, args...)...))
}

// api sends a raw request and returns status and body.
func (d *daemon) api(method, path, token, body string) (int, string) {
	d.t.Helper()
	req, err := http.NewRequest(method, d.base()+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := d.httpClient().Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// testNetFlags gives each test daemon its own nftables table, veth prefix,
// address pool and ports, so it never touches a real daemon's (or another
// test's) network state.
func testNetFlags(t testing.TB) []string {
	port := func() string {
		a := freeAddr(t)
		return a[strings.LastIndex(a, ":")+1:]
	}
	return []string{"--net-table", "corral-e2e", "--net-link-prefix", "cre",
		"--net-pool", "10.89.0.0/16", "--dns-port", port(), "--proxy-port", port(), "--net-log-group", "7718",
		"--ports-listen", freeAddr(t)}
}
