package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// What issue 14's E2B layer needs from the core, on both runtimes: a
// watch sees what happens in the overlay root and on a tmpfs, made by
// processes in the sandbox and by the file API, in directories made
// after it started too.
func TestWatchFiles(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testWatchFiles(t, d, rt) })
	}
}

func testWatchFiles(t *testing.T, d *daemon, rt string) {
	ctx := context.Background()
	id := d.create("--runtime", rt, "--timeout", "10m")
	d.mustCLI("exec", id, "--", "mkdir", "-p", "/root/w", "/dev/shm/w")
	for _, dir := range []string{"/root/w", "/dev/shm/w"} {
		ws, err := d.client.Watch(ctx, id, dir, true)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		script := `set -e; cd ` + dir + `; echo a > f; chmod 600 f; mv f g; mkdir -p n/m; sleep 0.3; echo b > n/m/deep; rm g`
		d.mustCLI("exec", id, "--", "sh", "-c", script)
		if _, err := d.client.WriteFile(ctx, id, dir+"/n/api.txt", strings.NewReader("api"), 0o644); err != nil {
			t.Fatal(err)
		}
		evs := watchUntil(t, ws, func(ev apiv1.WatchEvent) bool { return ev.Type == apiv1.WatchCreate && ev.Name == "n/api.txt" })
		ws.Close()
		for _, want := range [][2]string{{"create", "f"}, {"write", "f"}, {"chmod", "f"}, {"rename", "f"}, {"create", "g"},
			{"create", "n"}, {"create", "n/m"}, {"create", "n/m/deep"}, {"remove", "g"}, {"create", "n/api.txt"}} {
			if !watchSaw(evs, want[0], want[1]) {
				t.Errorf("%s on %s: no %s of %s in %+v", dir, rt, want[0], want[1], evs)
			}
		}
		for _, ev := range evs {
			if ev.Name != "" && ev.Path != dir+"/"+ev.Name {
				t.Errorf("%s: event %+v: path and name disagree", dir, ev)
			}
		}
	}
	// A watch on a missing path is a 404 naming it; the CLI prints events.
	if _, err := d.client.Watch(ctx, id, "/no/such", false); !corral.NotFound(err) || !strings.Contains(err.Error(), "/no/such") {
		t.Errorf("a missing path: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, binary, "fs", "watch", id, "/root/w")
	cmd.Env = append(cmd.Environ(), "CORRAL_URL=http://"+d.addr, "CORRAL_TOKEN="+d.token)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if line, err := readLine(stderr); err != nil || !strings.HasPrefix(line, "watching /root/w") {
		t.Fatalf("corral fs watch said %q, %v", line, err)
	}
	d.mustCLI("exec", id, "--", "touch", "/root/w/cli")
	if line, err := readLine(stdout); err != nil || line != "create /root/w/cli" {
		t.Errorf("corral fs watch printed %q, %v", line, err)
	}
}

// watchUntil reads events until done says so, or fails after a minute.
func watchUntil(t *testing.T, ws *corral.WatchStream, done func(apiv1.WatchEvent) bool) []apiv1.WatchEvent {
	t.Helper()
	var evs []apiv1.WatchEvent
	finished := make(chan error, 1)
	go func() {
		for {
			ev, err := ws.Next()
			if err != nil {
				finished <- err
				return
			}
			evs = append(evs, ev)
			if done(ev) {
				finished <- nil
				return
			}
		}
	}()
	select {
	case err := <-finished:
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("watch: %v (events %+v)", err, evs)
		}
	case <-time.After(time.Minute):
		ws.Close()
		<-finished
		t.Fatalf("watch timed out; events %+v", evs)
	}
	return evs
}

func watchSaw(evs []apiv1.WatchEvent, typ, name string) bool {
	for _, ev := range evs {
		if ev.Type == typ && ev.Name == name {
			return true
		}
	}
	return false
}

// readLine reads one line from r (unbuffered, so nothing after it is
// lost), within 30 s.
func readLine(r io.Reader) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		var b []byte
		one := make([]byte, 1)
		for {
			if _, err := r.Read(one); err != nil {
				ch <- res{string(b), err}
				return
			}
			if one[0] == '\n' {
				ch <- res{string(b), nil}
				return
			}
			b = append(b, one[0])
		}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-time.After(30 * time.Second):
		return "", errors.New("no line within 30 s")
	}
}

// The sampler reports a busy sandbox's CPU, memory and disk on both
// runtimes, and corral stats shows it.
func TestMetrics(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--metrics-interval", "1s")
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testMetrics(t, d, rt) })
	}
}

func testMetrics(t *testing.T, d *daemon, rt string) {
	ctx := context.Background()
	id := d.create("--runtime", rt, "--memory", "512", "--disk", "2", "--cpu-limit", "1", "--timeout", "10m")
	d.mustCLI("exec", id, "--", "sh", "-c", "head -c 64000000 /dev/urandom > /root/blob && sync")
	d.mustCLI("exec", "-d", id, "--", "sh", "-c", "end=$(($(date +%s)+8)); while [ $(date +%s) -lt $end ]; do :; done")
	var busy apiv1.MetricSample
	deadline := time.Now().Add(45 * time.Second)
	for busy.CPUPercent < 40 || busy.DiskUsed < 60e6 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no busy sample with the blob within 45 s; last %+v", rt, busy)
		}
		time.Sleep(time.Second)
		m, err := d.client.Metrics(ctx, id, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Interval != 1 {
			t.Fatalf("interval %v", m.Interval)
		}
		for _, s := range m.Samples {
			if s.CPUPercent >= busy.CPUPercent {
				busy.CPUPercent = s.CPUPercent
			}
			busy.DiskUsed = max(busy.DiskUsed, s.DiskUsed)
			busy.MemoryUsed, busy.MemoryTotal, busy.DiskTotal, busy.CPUCount = s.MemoryUsed, s.MemoryTotal, s.DiskTotal, s.CPUCount
		}
	}
	if busy.CPUPercent > 130 || busy.MemoryUsed == 0 || busy.MemoryTotal != 512<<20 || busy.DiskTotal != 2048<<20 || busy.CPUCount != 1 {
		t.Errorf("%s: sample %+v (a 1-core limit, 512 MiB, 2 GiB)", rt, busy)
	}
	if rt == "gvisor" {
		// gVisor frees the layer file's blocks when the guest removes a file.
		d.mustCLI("exec", id, "--", "rm", "/root/blob")
		waitFor(t, 30*time.Second, "the disk figure to fall after rm", func() bool {
			m, err := d.client.Metrics(ctx, id, time.Now().Add(-1500*time.Millisecond))
			return err == nil && len(m.Samples) > 0 && m.Samples[len(m.Samples)-1].DiskUsed < 40e6
		})
	}
	if out := d.mustCLI("stats", id); !strings.Contains(out, id) || !strings.Contains(out, "MiB") {
		t.Errorf("corral stats: %q", out)
	}
}

// A lifetime changed while the sandbox runs survives a daemon restart:
// one extended past its spec's timeout is still running after the
// restart and after that timeout, and one shortened then ends at its new
// end, as a timeout; corral timeout and corral tag work by name.
func TestLifetimeAcrossRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ids := map[string]string{}
	var ends time.Time // the latest end of the spec's timeouts
	for _, rt := range runtimes {
		// A lifetime a vm create cannot outlast on a loaded host (the
		// create itself counts), which the extension must then outlive.
		ids[rt] = d.create("--runtime", rt, "--timeout", "45s", "--name", "life-"+rt)
		sb, err := d.client.Get(context.Background(), ids[rt])
		if err != nil {
			t.Fatal(err)
		}
		if sb.ExpiresAt.After(ends) {
			ends = *sb.ExpiresAt
		}
		d.mustCLI("timeout", "--extend-only", "life-"+rt, "1h")
		if out := d.mustCLI("tag", "life-"+rt, "team=a", "gone-"); !strings.Contains(out, "team=a") {
			t.Errorf("%s: corral tag printed %q", rt, out)
		}
	}
	d.stop()
	d.start()
	time.Sleep(time.Until(ends) + time.Second) // past the spec's timeouts
	for rt, id := range ids {
		var sb apiv1.Sandbox
		if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil {
			t.Fatal(err)
		}
		if sb.State != "running" || sb.ExpiresAt == nil || time.Until(*sb.ExpiresAt) < 50*time.Minute || sb.Tags["team"] != "a" {
			t.Fatalf("%s after a restart: %s, expires %v, tags %v", rt, sb.State, sb.ExpiresAt, sb.Tags)
		}
		if out := d.mustCLI("ls", "--tag", "team=a", "--state", "running"); !strings.Contains(out, id) {
			t.Errorf("ls --tag team=a: %q", out)
		}
	}
	t0 := time.Now()
	for _, rt := range runtimes {
		d.mustCLI("timeout", "life-"+rt, "3s")
	}
	for rt, id := range ids {
		w, err := d.client.Wait(context.Background(), id, 60)
		if err != nil || w.EndReason != "timeout" || w.ExitCode != 124 {
			t.Errorf("%s: wait %+v, %v", rt, w, err)
		}
	}
	if took := time.Since(t0); took > 30*time.Second {
		t.Errorf("the shortened sandboxes ended %s after the change", took)
	}
}
