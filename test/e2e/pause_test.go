package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The must-show, on both runtimes: a 100 MB file and 1,000 small
// ones, a counting process and a TCP listener survive a pause and a
// resume, with a daemon restart in between the second time; paused time
// does not count against the timeout.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	w := newWorld(t)
	d := startDaemon(t, "--dns-upstream", w.dnsAddr)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testPauseResume(t, d, rt) })
	}
}

// egress is what a sandbox gets from the test's internet ("" if nothing).
func egress(d *daemon, id string) string {
	return d.curl(id, "http://"+inetAddr+"/")
}

func testPauseResume(t *testing.T, d *daemon, rt string) {
	id := d.create("--runtime", rt, "--memory", "768", "--timeout", "10m")
	setup := `set -e
head -c 100000000 /dev/urandom > /root/big
mkdir -p /root/small && for i in $(seq 1 1000); do echo "file $i $RANDOM" > /root/small/$i; done
setsid sh -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.2; done' </dev/null >/dev/null 2>&1 &
setsid python3 -m http.server 8080 --directory /root/small </dev/null >/dev/null 2>&1 &
for i in $(seq 200); do test -s /tmp/count && curl -sf http://127.0.0.1:8080/1 >/dev/null && exit 0; sleep 0.1; done
exit 1`
	d.mustCLI("exec", id, "--", "sh", "-c", setup)
	sums := func() string {
		return d.mustCLI("exec", id, "--", "sh", "-c", "sha256sum /root/big; cat /root/small/* | sha256sum")
	}
	count := func() int {
		n, err := strconv.Atoi(strings.TrimSpace(d.mustCLI("exec", id, "--", "cat", "/tmp/count")))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := sums()
	if out := egress(d, id); !strings.HasPrefix(out, "inet ") {
		t.Fatalf("no egress before the pause: %q", out)
	}
	for round, restart := range []bool{false, true} {
		// The counter may tick (every 0.2 s) while the sandbox runs: from
		// the first read until the pause returns, and from the resume until
		// the second read; never in the paused time between.
		running := time.Now()
		c1 := count()
		if out := d.mustCLI("pause", id); strings.TrimSpace(out) != "paused" {
			t.Fatalf("round %d: pause printed %q", round, out)
		}
		ran := time.Since(running)
		if _, errs, code := d.cli("", "exec", id, "--", "true"); code == 0 || !strings.Contains(errs, "paused") {
			t.Errorf("round %d: exec in a paused sandbox: exit %d %q", round, code, errs)
		}
		var sb struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil || sb.State != "paused" {
			t.Errorf("round %d: inspect says %q (%v)", round, sb.State, err)
		}
		// Paused for a second (five ticks, more than the bound's margin
		// of two); the restart round is paused longer.
		time.Sleep(time.Second)
		if restart {
			d.stop()
			d.start()
		}
		running = time.Now()
		if out := d.mustCLI("resume", id); strings.TrimSpace(out) != "running" {
			t.Fatalf("round %d: resume printed %q", round, out)
		}
		c2 := count()
		ran += time.Since(running)
		if most := c1 + int(ran/(200*time.Millisecond)) + 2; c2 < c1 || c2 > most {
			t.Errorf("round %d: the counter was %d before the pause and %d after (at most %d in the %s it ran): it did not continue where it was",
				round, c1, c2, most, ran.Round(time.Millisecond))
		}
		var c3 int
		poll(5*time.Second, func() bool { c3 = count(); return c3 > c2 })
		if c3 <= c2 {
			t.Errorf("round %d: the counter stopped after the resume (%d, then %d for 5 s)", round, c2, c3)
		}
		if after := sums(); after != before {
			t.Errorf("round %d: files changed across the pause:\n%s\n%s", round, before, after)
		}
		if out := d.mustCLI("exec", id, "--", "curl", "-sS", "--max-time", "10", "http://127.0.0.1:8080/7"); !strings.HasPrefix(out, "file 7 ") {
			t.Errorf("round %d: the listener after the resume: %q", round, out)
		}
		if out := egress(d, id); !strings.HasPrefix(out, "inet ") {
			t.Errorf("round %d: no egress after the resume: %q; routes: %s", round, out,
				d.mustCLI("exec", id, "--", "cat", "/proc/net/route"))
		}
	}
	events := d.mustCLI("events", id)
	for _, want := range []string{"paused", "resumed"} {
		if !strings.Contains(events, want) {
			t.Errorf("event log lacks %q:\n%s", want, events)
		}
	}
	d.mustCLI("rm", id)
	d.assertNoLeaks(t, []string{id})
}

// With --auto-pause, an idle sandbox is paused instead of ended, and the
// next command on it resumes it where it was.
func TestAutoPause(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := d.create("--idle-timeout", "2s", "--auto-pause")
	d.mustCLI("exec", id, "--", "sh", "-c",
		`setsid sh -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.2; done' </dev/null >/dev/null 2>&1 &`)
	state := func() string {
		var sb struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil {
			t.Fatal(err)
		}
		return sb.State
	}
	if !poll(30*time.Second, func() bool { return state() == "paused" }) {
		t.Fatalf("the idle sandbox is %s, not paused", state())
	}
	n1, err := strconv.Atoi(strings.TrimSpace(d.mustCLI("exec", id, "--", "cat", "/tmp/count")))
	if err != nil {
		t.Fatal(err)
	}
	if n1 < 1 {
		t.Errorf("the counter read %d after the wake-up", n1)
	}
	time.Sleep(600 * time.Millisecond)
	n2, _ := strconv.Atoi(strings.TrimSpace(d.mustCLI("exec", id, "--", "cat", "/tmp/count")))
	if n2 <= n1 {
		t.Errorf("the counter does not run after the wake-up: %d then %d", n1, n2)
	}
	events := d.mustCLI("events", id)
	for _, want := range []string{"idle_timeout", "paused", "resumed"} {
		if !strings.Contains(events, want) {
			t.Errorf("events lack %q:\n%s", want, events)
		}
	}
	if _, errs, code := d.cli("", "create", "--auto-pause"); code == 0 || !strings.Contains(errs, "idle_timeout") {
		t.Errorf("--auto-pause without --idle-timeout: exit %d %q", code, errs)
	}
	d.mustCLI("rm", id)
}
