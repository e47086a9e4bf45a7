package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// The usage test's server: a namespace this test creates at usageSrvAddr
// (TEST-NET-2, routed from the host only), answering GET /N with N bytes
// and PUT with the size of what it read.
const (
	usageSrvAddr = "198.51.100.129"
	// usageHostAddr is the host's side: a /32, so the server is beyond a
	// router and not on the host's LAN, which the daemon denies.
	usageHostAddr = "198.51.100.190"
	// transferBytes is the known size each way.
	transferBytes = 20_000_000
	// loopSeconds is how long the CPU-bound loop runs.
	loopSeconds = 10
)

const usageServer = `
import http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_GET(self):
        n = int(self.path.strip('/'))
        self.send_response(200); self.send_header('Content-Length', str(n)); self.end_headers()
        chunk = b'x' * 65536
        while n > 0:
            self.wfile.write(chunk[:min(n, len(chunk))]); n -= min(n, len(chunk))
    def do_PUT(self):
        n = int(self.headers['Content-Length']); got = 0
        while got < n:
            b = self.rfile.read(min(65536, n - got))
            if not b: break
            got += len(b)
        body = str(got).encode()
        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(('0.0.0.0', 80), H).serve_forever()
`

// startUsageServer creates the server's namespace, joined to the host by a
// veth, and starts the server.
func startUsageServer(t *testing.T) {
	b := make([]byte, 3)
	rand.Read(b)
	name := "cwu" + hex.EncodeToString(b)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	run(t, "ip", "link", "add", name, "type", "veth", "peer", "name", "w0", "netns", name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	run(t, "ip", "addr", "add", usageHostAddr+"/32", "dev", name)
	run(t, "ip", "link", "set", name, "up")
	run(t, "ip", "-n", name, "addr", "add", usageSrvAddr+"/26", "dev", "w0")
	run(t, "ip", "-n", name, "link", "set", "w0", "up")
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	run(t, "ip", "-n", name, "route", "add", usageHostAddr+"/32", "dev", "w0")
	run(t, "ip", "-n", name, "route", "add", "default", "via", usageHostAddr)
	run(t, "ip", "route", "add", usageSrvAddr+"/32", "dev", name, "src", usageHostAddr)
	ctx, cancel := context.WithCancel(context.Background())
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", name, "python3", "-c", usageServer)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Wait() })
}

// TestUsageMetering: a CPU-bound loop of a known time in a sandbox with
// --cpu 0.5 --cpu-limit 1 meters as that many CPU-seconds (within 15%),
// most of them burst, while an idle sandbox beside it meters near zero; a
// download and an upload of a known size show in its network bytes
// (within 5%); paused time is counted apart; and once both end their
// usage is in their records, in GET /v1/usage grouped by tag, and in
// corral usage --csv. Both runtimes: the vm's CPU is QEMU's cgroup, its
// traffic goes through a tap, and its pause keeps its cgroup.
func TestUsageMetering(t *testing.T) {
	// Not parallel: it meters a busy loop's share of the CPU, which other
	// tests' load takes.
	d := startDaemon(t)
	startUsageServer(t)
	for _, rt := range []string{"gvisor", "vm"} {
		t.Run(rt, func(t *testing.T) { testUsage(t, d, rt) })
	}
}

func testUsage(t *testing.T, d *daemon, rt string) {
	team := "t-" + rt
	busy := d.create("--runtime", rt, "--cpu", "0.5", "--cpu-limit", "1", "--tag", "team="+team)
	idle := d.create("--runtime", rt, "--cpu", "0.5", "--cpu-limit", "1", "--tag", "team="+team)
	busy0, idle0 := sandboxUsage(t, d, busy), sandboxUsage(t, d, idle)
	hostIdle0 := hostIdleSeconds(t)
	start := time.Now()
	d.mustCLI("exec", busy, "--", "sh", "-c", "timeout "+strconv.Itoa(loopSeconds)+" sh -c 'while :; do :; done'; true")
	wall := time.Since(start).Seconds()
	hostIdle := hostIdleSeconds(t) - hostIdle0
	busy1, idle1 := sandboxUsage(t, d, busy), sandboxUsage(t, d, idle)
	cpu := busy1.CPUSeconds - busy0.CPUSeconds
	burst := busy1.CPUBurstSeconds - busy0.CPUBurstSeconds
	idleCPU := idle1.CPUSeconds - idle0.CPUSeconds
	t.Logf("%s: the %d s loop metered %.2f CPU-s (burst %.2f) in %.1f s, the host idle %.2f CPU-s meanwhile; the idle sandbox %.3f CPU-s",
		rt, loopSeconds, cpu, burst, wall, hostIdle, idleCPU)
	switch {
	case cpu > 1.15*loopSeconds:
		t.Errorf("%s: a %d s loop at cpu-limit 1 metered %.2f CPU-seconds, more than the limit allows", rt, loopSeconds, cpu)
	case cpu >= 0.85*loopSeconds:
	case hostIdle >= 0.15*loopSeconds:
		// Less than the limit while the host had CPU to spare: the meter
		// missed what the loop used.
		t.Errorf("%s: a %d s loop at cpu-limit 1 metered %.2f CPU-seconds, want %d ± 15%% (the host was idle %.2f CPU-s meanwhile)",
			rt, loopSeconds, cpu, loopSeconds, hostIdle)
	case cpu < 0.25*loopSeconds:
		t.Errorf("%s: a %d s loop metered %.2f CPU-seconds on a saturated host, less than any fair share", rt, loopSeconds, cpu)
	default:
		// Other work on the host took the CPU the limit allowed: the loop
		// got what CFS gave it, which is what the meter must show.
		t.Logf("%s: the host had no CPU to spare; the loop got %.0f%% of its limit", rt, cpu/loopSeconds*100)
	}
	// The request is half a core: about the other half is burst.
	if want := max(0, cpu-0.5*wall); math.Abs(burst-want) > 0.15*loopSeconds {
		t.Errorf("%s: burst above the 0.5 request %.2f CPU-s, want about %.2f", rt, burst, want)
	}
	if idleCPU > 0.05*loopSeconds {
		t.Errorf("%s: an idle sandbox metered %.2f CPU-seconds over %.1f s, want near zero", rt, idleCPU, wall)
	}

	url := "http://" + usageSrvAddr + "/"
	before := sandboxUsage(t, d, busy)
	d.mustCLI("exec", busy, "--", "sh", "-c", "curl -sf -o /tmp/blob "+url+strconv.Itoa(transferBytes)+" && test $(stat -c %s /tmp/blob) = "+strconv.Itoa(transferBytes))
	mid := sandboxUsage(t, d, busy)
	if out := d.mustCLI("exec", busy, "--", "curl", "-sf", "-T", "/tmp/blob", url+"up"); strings.TrimSpace(out) != strconv.Itoa(transferBytes) {
		t.Fatalf("%s: the upload: server read %q bytes", rt, out)
	}
	after := sandboxUsage(t, d, busy)
	in, out := float64(mid.NetInBytes-before.NetInBytes), float64(after.NetOutBytes-mid.NetOutBytes)
	t.Logf("%s: a %d-byte download metered %.0f bytes in (%.2f%% over), the upload %.0f bytes out (%.2f%% over)", rt, transferBytes,
		in, (in/transferBytes-1)*100, out, (out/transferBytes-1)*100)
	for _, c := range []struct {
		what string
		got  float64
	}{{"download: net_in_bytes", in}, {"upload: net_out_bytes", out}} {
		if math.Abs(c.got-transferBytes) > 0.05*transferBytes {
			t.Errorf("%s: %s grew %.0f for %d bytes, want within 5%%", rt, c.what, c.got, transferBytes)
		}
	}

	// Paused time is counted apart, and the CPU used before the pause
	// stays counted (gVisor's restore starts a new cgroup).
	prePause := sandboxUsage(t, d, idle)
	d.mustCLI("pause", idle)
	d.mustCLI("resume", idle)
	d.mustCLI("rm", busy, idle)
	idleEnd := settled2(t, d, idle)
	life := idleEnd.EndedAt.Sub(idleEnd.StartedAt).Seconds()
	if idleEnd.PausedSeconds <= 0 || math.Abs(idleEnd.RunningSeconds+idleEnd.PausedSeconds-life) > 0.01 || idleEnd.CPUSeconds < prePause.CPUSeconds {
		t.Errorf("%s: after a pause: running %.2f s + paused %.2f s of a %.2f s life, CPU %.3f s (before the pause %.3f s)", rt,
			idleEnd.RunningSeconds, idleEnd.PausedSeconds, life, idleEnd.CPUSeconds, prePause.CPUSeconds)
	}
	var sb apiv1.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("inspect", busy)), &sb); err != nil {
		t.Fatal(err)
	}
	if sb.Usage == nil || sb.Usage.CPUSeconds < after.CPUSeconds || sb.Usage.NetInBytes < after.NetInBytes || sb.Usage.RunningSeconds < wall {
		t.Fatalf("%s: the ended sandbox's usage %+v, want at least %+v", rt, sb.Usage, after)
	}
	settled := sandboxUsage(t, d, busy)
	if settled.Live || settled.EndedAt == nil || settled.Tags["team"] != team {
		t.Errorf("%s: settled usage %+v", rt, settled)
	}
	var rep apiv1.UsageReport
	if err := json.Unmarshal([]byte(d.mustCLI("usage", "--since", "1h", "--by", "tag:team", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range rep.Groups {
		if g.Key == team {
			found = true
			if g.Sandboxes != 2 || math.Abs(g.CPUSeconds-(sb.Usage.CPUSeconds+idleEnd.CPUSeconds)) > 1e-6 {
				t.Errorf("%s: group %s: %d sandboxes, %.3f CPU-s", rt, team, g.Sandboxes, g.CPUSeconds)
			}
		}
	}
	if !found {
		t.Errorf("%s: no group %s in %+v", rt, team, rep)
	}
	csv := d.mustCLI("usage", "--since", "1h", "--by", "runtime", "--csv")
	if !strings.HasPrefix(csv, "runtime,sandboxes,cpu_seconds,") || !strings.Contains(csv, "\n"+rt+",") {
		t.Errorf("%s: corral usage --csv:\n%s", rt, csv)
	}
}

// sandboxUsage reads GET /v1/sandboxes/{id}/usage.
func sandboxUsage(t *testing.T, d *daemon, id string) apiv1.SandboxUsage {
	t.Helper()
	u, err := d.client.SandboxUsage(context.Background(), id)
	if err != nil {
		t.Fatalf("usage of %s: %v", id, err)
	}
	return *u
}

// settled2 is an ended sandbox's settled usage.
func settled2(t *testing.T, d *daemon, id string) apiv1.SandboxUsage {
	t.Helper()
	u := sandboxUsage(t, d, id)
	if u.Live {
		t.Fatalf("usage of ended %s is live", id)
	}
	return u
}

// hostIdleSeconds is the CPU time the host's CPUs spent idle so far
// (/proc/stat: idle and iowait, in USER_HZ ticks of 10 ms).
func hostIdleSeconds(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	if len(f) < 6 || f[0] != "cpu" {
		t.Fatalf("/proc/stat: %q", f)
	}
	idle, _ := strconv.ParseFloat(f[4], 64)
	iowait, _ := strconv.ParseFloat(f[5], 64)
	return (idle + iowait) / 100
}
