package e2e

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// sinkServer accepts TCP connections on :81 and holds each until its
// client closes it.
const sinkServer = `
import asyncio
async def hold(r, w):
    await r.read()
    w.close()
async def main():
    s = await asyncio.start_server(hold, '0.0.0.0', 81, backlog=4096)
    await s.serve_forever()
asyncio.run(main())
`

// hogScript opens up to N connections to the sink, one after another,
// then prints how many the proxy kept open (a refused one is reset) and
// holds them.
const hogScript = `
import socket, sys, time
held = []
for i in range(int(sys.argv[1])):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect(("198.51.100.1", 81))
        held.append(s)
    except OSError:
        s.close()
time.sleep(2)
alive = 0
for s in held:
    s.setblocking(False)
    try:
        s.recv(1)
    except BlockingIOError:
        alive += 1
    except OSError:
        pass
print(alive, flush=True)
time.sleep(3600)
`

// victimScript opens N connections to the web server at once, sends a
// request on each, and prints how many got their answer.
const victimScript = `
import socket, sys
socks = []
for i in range(int(sys.argv[1])):
    s = socket.create_connection(("198.51.100.1", 80), timeout=10)
    socks.append(s)
ok = 0
for s in socks:
    s.sendall(b"GET / HTTP/1.0\r\nHost: victim\r\n\r\n")
for s in socks:
    data = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
    except OSError as e:
        print("error", e, file=sys.stderr)
    if b"200 OK" in data and b"inet victim" in data:
        ok += 1
print(ok, flush=True)
`

// The fair shares: eight hostile sandboxes each open and hold as
// many egress connections as they can, and a ninth still gets its
// connections through; the hostile ones are told in their events which
// bound refused them. The proxy's ceiling is lowered so that the hostile
// sandboxes' bursts fill all of it they may use (with the defaults here
// each would stop at its own limit first): with the old bounds (512 a
// sandbox, 4,096 in all), eight sandboxes took every connection.
func TestFairShareEgress(t *testing.T) {
	// Not parallel: it fills the proxy and the host with connections, and times the victim beside them.
	const (
		hostiles   = 8
		ceiling    = 1024
		perSandbox = 256
		guaranteed = 16
		victimConn = 12
	)
	w := newWorld(t)
	startSink(t, w.inetNS)
	d := startDaemon(t, "--dns-upstream", w.dnsAddr, "--egress-max-conns", strconv.Itoa(ceiling),
		"--egress-max-conns-per-sandbox", strconv.Itoa(perSandbox), "--egress-guaranteed-conns", strconv.Itoa(guaranteed))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ids := make([]string, hostiles)
	for i := range ids {
		ids[i] = d.create()
	}
	victim := d.create()

	held := make([]int, hostiles)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held[i] = d.firstLine(ctx, t, id, "python3", "-c", hogScript, "600")
		}()
	}
	wg.Wait()
	total := 0
	for i, n := range held {
		total += n
		if n > perSandbox {
			t.Errorf("hostile %s holds %d connections, over its limit of %d", ids[i], n, perSandbox)
		}
	}
	t.Logf("the hostile sandboxes hold %v connections, %d in all", held, total)
	if max := ceiling/2 + hostiles*guaranteed; total > max || total < ceiling/2 {
		t.Errorf("the hostile sandboxes hold %d connections, want between %d (all bursts may use) and %d", total, ceiling/2, max)
	}

	got := d.firstLine(ctx, t, victim, "python3", "-c", victimScript, strconv.Itoa(victimConn))
	if got != victimConn {
		t.Errorf("the victim got %d of %d requests through with the hostile sandboxes holding theirs", got, victimConn)
	}
	for _, id := range ids {
		ev := d.waitEvent(ctx, t, id, func(e apiv1.Event) bool {
			return e.Kind == "limit_reached" && e.Fields["resource"] == "egress_connections"
		})
		if ev.Fields["limit"] != "per_sandbox" && ev.Fields["limit"] != "shared" || ev.Fields["max"] == "" || ev.Fields["refused"] == "" {
			t.Errorf("%s: limit event %+v does not name its bound", id, ev)
		}
	}
	evs, err := d.client.Events(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == "limit_reached" {
			t.Errorf("the victim was refused: %+v", e)
		}
	}
}

// firstLine runs a command in sandbox id and returns the number its
// first line of output says; the command keeps running (holding what it
// opened) until the test ends.
func (d *daemon) firstLine(ctx context.Context, t *testing.T, id string, cmd ...string) int {
	s, err := d.client.Exec(ctx, id, apiv1.ExecRequest{Cmd: cmd})
	if err != nil {
		t.Error(err)
		return -1
	}
	t.Cleanup(func() { s.Close() })
	var out, errb strings.Builder
	for {
		ev, err := s.Next()
		if err != nil {
			t.Errorf("%s: %v (stderr %q)", id, err, errb.String())
			return -1
		}
		switch ev.Type {
		case apiv1.EventStdout:
			out.Write(ev.Data)
		case apiv1.EventStderr:
			errb.Write(ev.Data)
		case apiv1.EventEnd:
			t.Errorf("%s: ended (%d) before a line: %q %q", id, ev.ExitCode, out.String(), errb.String())
			return -1
		}
		if line, _, ok := strings.Cut(out.String(), "\n"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Errorf("%s: %q", id, line)
			}
			return n
		}
	}
}

// waitEvent waits up to 30 s for an event of sandbox id that match
// accepts.
func (d *daemon) waitEvent(ctx context.Context, t *testing.T, id string, match func(apiv1.Event) bool) apiv1.Event {
	t.Helper()
	var evs []apiv1.Event
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var err error
		if evs, err = d.client.Events(ctx, id); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if match(e) {
				return e
			}
		}
	}
	t.Errorf("%s: no such event among %d", id, len(evs))
	return apiv1.Event{}
}

// startSink runs sinkServer in namespace ns and waits until it listens.
func startSink(t *testing.T, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "python3", "-c", sinkServer)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := exec.Command("ip", "netns", "exec", ns, "ss", "-ltnH", "sport = :81").Output()
		if strings.Contains(string(out), ":81") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the sink never listened")
		}
	}
}
