package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// inNS runs f on a thread in namespace ns (what f opens stays there;
// what it returns runs anywhere).
func inNS(t testing.TB, ns string, f func() error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	target, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		t.Fatal(err)
	}
	ferr := f()
	if err := netns.Set(orig); err != nil {
		panic(err) // this thread must not run anything else in the wrong namespace
	}
	runtime.UnlockOSThread()
	if ferr != nil {
		t.Fatal(ferr)
	}
}

// bulkServer serves size bytes of zeros on port 9999 inside namespace ns
// (the listener is made in the namespace; serving runs anywhere).
func bulkServer(t testing.TB, ns string, size int64) {
	var l net.Listener
	inNS(t, ns, func() (err error) {
		l, err = net.Listen("tcp", "0.0.0.0:9999")
		return err
	})
	t.Cleanup(func() { l.Close() })
	zeros := make([]byte, 1<<20)
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for left := size; left > 0; left -= int64(len(zeros)) {
			if _, err := w.Write(zeros[:min(int64(len(zeros)), left)]); err != nil {
				return
			}
		}
	}))
}

// BenchmarkEgress1GiB moves 1 GiB from the test internet into a sandbox
// (through veth, nftables and the egress proxy) and, in the same run,
// between two plain namespaces (the host and the test internet), and
// reports both with the ratio.
//
//	sudo go test ./test/e2e -run '^$' -bench Egress1GiB -benchtime 3x
func BenchmarkEgress1GiB(b *testing.B) {
	if skipWhy != "" {
		b.Skip(skipWhy)
	}
	const size = 1 << 30
	w := newWorld(b)
	bulkServer(b, w.inetNS, size)
	d := startDaemon(b, "--dns-upstream", w.dnsAddr)
	id := d.create("--memory", "1024")
	url := "http://" + inetAddr + ":9999/"
	var sandbox, plain time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		out := d.mustCLI("exec", id, "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}", url)
		sandbox += time.Since(t0)
		if strings.TrimSpace(out) != strconv.Itoa(size) {
			b.Fatalf("sandbox downloaded %q bytes", out)
		}
		t0 = time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		plain += time.Since(t0)
		if n != size {
			b.Fatalf("plain namespace downloaded %d bytes", n)
		}
	}
	mibps := func(d time.Duration) float64 { return float64(b.N) * 1024 / d.Seconds() }
	b.ReportMetric(mibps(sandbox), "sandbox-MiB/s")
	b.ReportMetric(mibps(plain), "plain-MiB/s")
	b.ReportMetric(mibps(sandbox)/mibps(plain), "ratio")
	fmt.Printf("1 GiB egress: sandbox %.0f MiB/s, plain namespaces %.0f MiB/s, ratio %.2f\n", mibps(sandbox), mibps(plain), mibps(sandbox)/mibps(plain))
}
