package netpolicy

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
)

func TestConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{StateDir: "/x"}, true},
		{"no state dir", Config{}, false},
		{"ipv6 pool", Config{StateDir: "/x", Pool: netip.MustParsePrefix("fd00::/64")}, false},
		{"pool too small", Config{StateDir: "/x", Pool: netip.MustParsePrefix("10.0.0.0/31")}, false},
		{"short prefix", Config{StateDir: "/x", LinkPrefix: "e"}, false},
		{"odd prefix", Config{StateDir: "/x", LinkPrefix: "Crl"}, false},
		{"names too long", Config{StateDir: "/x", LinkPrefix: "abcdefghijkl"}, false},
		{"same ports", Config{StateDir: "/x", DNSPort: 5353, ProxyPort: 5353}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.cfg.withDefaults()
			if (err == nil) != tt.ok {
				t.Fatalf("withDefaults = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error %v is not invalid_argument", err)
			}
			if tt.ok && (c.Table != DefaultTable || c.Pool != DefaultPool || c.LinkPrefix != DefaultLinkPrefix || c.LogGroup != DefaultLogGroup) {
				t.Errorf("defaults not applied: %+v", c)
			}
		})
	}
}

func TestSlotAddressing(t *testing.T) {
	c, err := Config{StateDir: "/x"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	prefix, gw, addr := c.slotAddrs(0)
	if prefix.String() != "10.88.0.0/30" || gw.String() != "10.88.0.1" || addr.String() != "10.88.0.2" {
		t.Errorf("slot 0: %v %v %v", prefix, gw, addr)
	}
	last := slotCount(c.Pool) - 1
	prefix, gw, addr = c.slotAddrs(last)
	if prefix.String() != "10.88.255.252/30" || gw.String() != "10.88.255.253" || addr.String() != "10.88.255.254" {
		t.Errorf("slot %d: %v %v %v", last, prefix, gw, addr)
	}
	n := &Network{cfg: c}
	for _, i := range []uint32{0, 1, 0xa, last} {
		name := c.hostLinkName(i)
		if got, ok := n.parseLinkIndex(name); !ok || got != i {
			t.Errorf("parseLinkIndex(%s) = %d, %v", name, got, ok)
		}
	}
	for _, name := range []string{"crl", "crl01", "crlx", "eth0", "crl10000"} {
		if _, ok := n.parseLinkIndex(name); ok {
			t.Errorf("parseLinkIndex(%s) accepted", name)
		}
	}
}

func TestSpans(t *testing.T) {
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	denied := deniedSpans(nil)
	for _, a := range []string{"10.1.2.3", "127.0.0.1", "169.254.169.254", "100.64.0.1", "224.0.0.1", "255.255.255.255", "0.0.0.0"} {
		if !spansContain(denied, netip.MustParseAddr(a)) {
			t.Errorf("%s not denied", a)
		}
	}
	for _, a := range []string{"198.51.100.1", "8.8.8.8", "192.0.2.2", "203.0.113.5", "9.255.255.255", "11.0.0.0"} {
		if spansContain(denied, netip.MustParseAddr(a)) {
			t.Errorf("%s denied", a)
		}
	}
	// Consistent with the policy contract for every probe address.
	for _, a := range []string{"10.99.0.10", "10.100.0.1", "172.16.0.1", "172.32.0.1", "192.168.1.1", "198.18.0.1", "198.20.0.1"} {
		addr := netip.MustParseAddr(a)
		if spansContain(denied, addr) != policy.Denied(addr, nil) {
			t.Errorf("%s: spans and policy.Denied disagree", a)
		}
	}
	op := deniedSpans([]netip.Prefix{p("10.99.0.0/16"), p("fd00::/8")})
	if spansContain(op, netip.MustParseAddr("10.99.1.1")) || !spansContain(op, netip.MustParseAddr("10.98.255.255")) || !spansContain(op, netip.MustParseAddr("10.100.0.0")) {
		t.Error("operator range not carved out exactly")
	}
	merged := spansOf([]netip.Prefix{p("198.51.100.0/25"), p("198.51.100.128/25"), p("198.51.100.7/32"), p("::ffff:10.0.0.0/104"), p("10.0.0.0/8")})
	if len(merged) != 2 || merged[1] != (span{be32([4]byte{198, 51, 100, 0}), be32([4]byte{198, 51, 100, 255})}) {
		t.Errorf("merge: %+v", merged)
	}
	els := intervalElements(spansOf([]netip.Prefix{p("240.0.0.0/4"), p("10.0.0.0/8")}))
	if len(els) != 3 || !els[1].IntervalEnd || els[2].IntervalEnd {
		t.Errorf("interval elements: %+v", els)
	}
}

func TestState(t *testing.T) {
	c, err := Config{StateDir: t.TempDir()}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.MkdirAll(c.slotsDir(), 0o700))
	n := &Network{cfg: c, slots: map[string]*slotState{}}
	s, err := n.lease("sb-aaaaaaaaaaaaaaaa", policy.Policy{CIDRAllowlist: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	must(t, writeState(c, s))
	got, err := readState(c, "sb-aaaaaaaaaaaaaaaa")
	if err != nil || got.Slot != s.Slot || got.Index != s.Index || len(got.Policy.CIDRAllowlist) != 1 {
		t.Fatalf("readState = %+v, %v", got, err)
	}
	if _, err := readState(c, "sb-2aaaaaaaaaaaaaaa"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("readState(missing) = %v", err)
	}
	os.WriteFile(filepath.Join(c.slotsDir(), ".sb-3.tmp"), nil, 0o600)
	if ids, err := stateIDs(c); err != nil || len(ids) != 1 || ids[0] != "sb-aaaaaaaaaaaaaaaa" {
		t.Errorf("stateIDs = %v, %v", ids, err)
	}
	for _, id := range []string{"", "..", "a/b", "-x", string(make([]byte, 200))} {
		if checkID(id) == nil {
			t.Errorf("checkID(%q) accepted", id)
		}
	}
	must(t, removeState(c, "sb-aaaaaaaaaaaaaaaa"))
	must(t, removeState(c, "sb-aaaaaaaaaaaaaaaa"))
}
