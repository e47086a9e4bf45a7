package netpolicy

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"corral/internal/netpolicy/policy"
)

const transferSize = 1 << 30

// BenchmarkEgressProxy: 1 GiB over TCP from a sandbox namespace to the fake
// internet through Corral's path (DNAT to the proxy on the gateway, the
// fake splicing proxy, routing to the internet namespace), beside the same
// transfer between two namespaces joined by a plain veth pair.
//
//	go test -run '^$' -bench Egress -benchtime 1x ./internal/netpolicy/
func BenchmarkEgressProxy(b *testing.B) { benchEgress(b, nil) }

// BenchmarkEgressNAT: the same without a proxy (ProxyPort 0): forwarded
// through the filter chains and masqueraded.
func BenchmarkEgressNAT(b *testing.B) {
	benchEgress(b, func(c *Config) { c.ProxyPort, c.DNSPort = 0, 0 })
}

func benchEgress(b *testing.B, mutate func(*Config)) {
	e := newTestEnv(b, mutate)
	startServers(b, e.internet, "internet", discardPort)
	s := e.attach("sb-benchaaaaaaaaaaa", policy.Policy{})
	client, server := e.plainPair()
	startServers(b, server, "plain", discardPort)
	ctx := context.Background()
	var corral, plain time.Duration
	for b.Loop() {
		d, err := transfer(ctx, client, netip.AddrPortFrom(netip.MustParseAddr("10.99.1.2"), discardPort), transferSize)
		if err != nil {
			b.Fatalf("plain transfer: %v", err)
		}
		plain += d
		d, err = transfer(ctx, s.NetnsPath, netip.AddrPortFrom(internet1, discardPort), transferSize)
		if err != nil {
			b.Fatalf("corral transfer: %v", err)
		}
		corral += d
	}
	mibps := func(d time.Duration) float64 { return float64(b.N) * transferSize / (1 << 20) / d.Seconds() }
	b.ReportMetric(mibps(corral), "corral-MiB/s")
	b.ReportMetric(mibps(plain), "plain-MiB/s")
	b.ReportMetric(mibps(corral)/mibps(plain), "ratio")
	b.ReportMetric(0, "ns/op")
	b.Logf("1 GiB x %d: corral %.0f MiB/s (%v), plain veth %.0f MiB/s (%v)", b.N, mibps(corral), corral, mibps(plain), plain)
}

// plainPair returns two namespaces joined by a veth pair, 10.99.1.1/30 and
// 10.99.1.2/30, with no host involvement.
func (e *testEnv) plainPair() (client, server string) {
	t := e.t
	dir := t.TempDir()
	client, server = filepath.Join(dir, "client"), filepath.Join(dir, "server")
	for _, p := range []string{client, server} {
		must(t, createNetns(p))
		t.Cleanup(func() { removeNetns(p) })
	}
	cns, err := netns.GetFromPath(client)
	must(t, err)
	defer cns.Close()
	sns, err := netns.GetFromPath(server)
	must(t, err)
	defer sns.Close()
	name := "cx" + e.suffix + "p"
	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(sns))}))
	l, err := netlink.LinkByName(name)
	must(t, err)
	must(t, netlink.LinkSetNsFd(l, int(cns)))
	for _, side := range []struct {
		ns   netns.NsHandle
		link string
		addr string
	}{{cns, name, "10.99.1.1"}, {sns, "eth0", "10.99.1.2"}} {
		h, err := netlink.NewHandleAt(side.ns)
		must(t, err)
		defer h.Close()
		l, err := h.LinkByName(side.link)
		must(t, err)
		must(t, h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(netip.MustParseAddr(side.addr), 30)}))
		must(t, h.LinkSetUp(l))
		lo, _ := h.LinkByName("lo")
		must(t, h.LinkSetUp(lo))
	}
	for _, side := range []struct {
		ns   netns.NsHandle
		link string
	}{{cns, name}, {sns, "eth0"}} {
		h, err := netlink.NewHandleAt(side.ns)
		must(t, err)
		defer h.Close()
		must(t, waitUp(h, side.link))
	}
	return client, server
}
