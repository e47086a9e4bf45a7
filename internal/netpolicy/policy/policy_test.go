package policy

import (
	"net/netip"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"default", Policy{}, true},
		{"block", Policy{BlockNetwork: true}, true},
		{"block with allowlist", Policy{BlockNetwork: true, DomainAllowlist: []string{"a.test"}}, false},
		{"domains", Policy{DomainAllowlist: []string{"Allowed.Test.", "*.example.com"}}, true},
		{"bad domain", Policy{DomainAllowlist: []string{"exa mple.com"}}, false},
		{"empty label", Policy{DomainAllowlist: []string{"a..b"}}, false},
		{"cidrs", Policy{CIDRAllowlist: []netip.Prefix{netip.MustParsePrefix("198.51.100.7/24")}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			if err := p.Normalize(); (err == nil) != tt.ok {
				t.Fatalf("Normalize = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	p := Policy{DomainAllowlist: []string{"Allowed.Test.", "allowed.test"}, CIDRAllowlist: []netip.Prefix{netip.MustParsePrefix("198.51.100.7/24")}}
	if err := p.Normalize(); err != nil {
		t.Fatal(err)
	}
	if len(p.DomainAllowlist) != 1 || p.DomainAllowlist[0] != "allowed.test" || p.CIDRAllowlist[0].String() != "198.51.100.0/24" {
		t.Errorf("not canonical: %+v", p)
	}
}

func TestAllows(t *testing.T) {
	tests := []struct {
		name  string
		p     Policy
		dst   string
		allow bool
	}{
		{"default public", Policy{}, "198.51.100.10", true},
		{"default metadata", Policy{}, "169.254.169.254", false},
		{"default rfc1918", Policy{}, "10.1.2.3", false},
		{"default cgnat", Policy{}, "100.64.0.1", false},
		{"default loopback", Policy{}, "127.0.0.1", false},
		{"mapped loopback", Policy{}, "::ffff:127.0.0.1", false},
		{"ula", Policy{}, "fd00::2", false},
		{"block", Policy{BlockNetwork: true}, "198.51.100.10", false},
		{"cidr in", Policy{CIDRAllowlist: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}, "198.51.100.10", true},
		{"cidr out", Policy{CIDRAllowlist: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/25")}}, "198.51.100.200", false},
		{"cidr cannot reopen internal", Policy{CIDRAllowlist: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "10.1.2.3", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := tt.p.AllowsAddr(netip.MustParseAddr(tt.dst), nil)
			if ok != tt.allow {
				t.Errorf("AllowsAddr(%s) = %v (%s), want %v", tt.dst, ok, why, tt.allow)
			}
		})
	}
	if ok, _ := (Policy{}).AllowsAddr(netip.MustParseAddr("10.1.2.3"), []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}); !ok {
		t.Error("operator-allowed range still denied")
	}
	p := Policy{DomainAllowlist: []string{"allowed.test", "*.example.com"}}
	for name, want := range map[string]bool{"allowed.test": true, "ALLOWED.test.": true, "denied.test": false, "a.example.com": true, "example.com": false, "evilallowed.test": false} {
		if got := p.AllowsName(name); got != want {
			t.Errorf("AllowsName(%q) = %v, want %v", name, got, want)
		}
	}
}
