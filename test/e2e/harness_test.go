package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	if err := hostLock(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the host lock:", err)
		return 1
	}
	sweep()
	defer sweep()
	defer theWorld.tb.done()
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
	code := m.Run()
	vmSummary(os.Stdout)
	return code
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
	t     testing.TB
	state string
	// addr is the API's address (its slot's API port), kept across
	// restarts; envd is the envd face's.
	addr string
	envd string
	// slot is the daemon's share of the host's names and ports.
	slot *slot
	// net are the serve flags beside --listen and the paths: the slot's
	// network and listeners (one given port 0 by a test is rewritten to
	// the bound address after the first start) and the test's own.
	net    []string
	exited chan struct{} // closed when the process has exited
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
	state := newStateDir(t)
	d := newDaemon(t, state, extra...)
	d.tee = tee
	d.start()
	t.Cleanup(func() { d.teardown() })
	return d
}

// newDaemon is a daemon (not started) on state with a network slot of its
// own, no warm pool unless a flag given later asks for one (pools fill in
// the background, and most tests count sandboxes), and its API, envd face
// and ports origin on the slot's loopback ports; extra are more serve
// flags.
func newDaemon(t testing.TB, state string, extra ...string) *daemon {
	t.Helper()
	sl := takeSlot(t)
	flags := append(sl.flags(), "--warm-pool", "0")
	return &daemon{t: t, state: state, slot: sl, addr: sl.loopback(portAPI), net: append(flags, extra...)}
}

func (d *daemon) start() {
	d.t.Helper()
	if asksVM(d.net) {
		holdVM(d.t)
	}
	d.log = &bytes.Buffer{}
	listen := d.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ready := d.state + ".ready"
	_ = os.Remove(ready)
	seedVMDisks(d.state)
	args := append([]string{"serve", "--listen", listen, "--state-dir", d.state, "--ready-file", ready,
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
	exited := make(chan struct{})
	d.exited = exited
	go func() { _ = d.cmd.Wait(); close(exited) }()
	// The daemon writes its ready file once it serves, after the
	// sandboxes of the state directory are reconciled (one whose agent
	// does not answer is given the agent timeout, 30 s, before it is
	// ended): the wait must outlast it.
	r, err := waitReady(ready, exited, 90*time.Second)
	if err != nil {
		d.t.Fatalf("daemon did not come up: %v\n%s", err, d.log)
	}
	d.addr = r.Listen
	d.setFlag("--envd-listen", r.EnvdListen)
	d.setFlag("--ports-listen", r.PortsListen)
	d.setFlag("--metrics-listen", r.MetricsListen)
	d.envd = r.EnvdListen
	tok, err := os.ReadFile(filepath.Join(d.state, "token"))
	if err != nil {
		d.t.Fatal(err)
	}
	d.token = strings.TrimSpace(string(tok))
	d.client = corral.New(d.base(), d.token)
	d.client.HTTP = d.httpClient()
}

// ready is what a daemon's --ready-file holds (daemon.Ready).
type ready struct {
	Listen        string `json:"listen"`
	EnvdListen    string `json:"envd_listen"`
	PortsListen   string `json:"ports_listen"`
	MetricsListen string `json:"metrics_listen"`
	PID           int    `json:"pid"`
}

// waitReady waits for a server's ready file, or its exit.
func waitReady(path string, exited <-chan struct{}, limit time.Duration) (ready, error) {
	var r ready
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			return r, json.Unmarshal(b, &r)
		}
		select {
		case <-exited:
			return r, fmt.Errorf("it exited")
		case <-deadline.C:
			return r, fmt.Errorf("no ready file after %s", limit)
		case <-tick.C:
		}
	}
}

// setFlag sets every occurrence of a serve flag in d.net (the last one is
// what serve takes), when the value is not empty.
func (d *daemon) setFlag(name, value string) {
	for i := range d.net {
		if d.net[i] == name && i+1 < len(d.net) && value != "" {
			d.net[i+1] = value
		}
	}
}

// kill9 kills the daemon the hard way (its sandboxes keep running).
func (d *daemon) kill9() {
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		d.kill9()
	}
}

// running reports whether the daemon's process is alive.
func (d *daemon) running() bool {
	if d.exited == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
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
	harvestVMDisks(d.state)
	_ = os.RemoveAll(d.state)
	_ = os.Remove(d.state + ".ready")
}

// cli runs the corral CLI against this daemon with stdin and returns
// stdout, stderr and the exit code.
func (d *daemon) cli(stdin string, args ...string) (string, string, int) {
	d.t.Helper()
	if asksVM(args) {
		holdVM(d.t)
	}
	// A bound against a hung CLI, not a measure: an image build from the
	// package archives takes minutes on a loaded 2-core host.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
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
