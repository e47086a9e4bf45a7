package dnsd

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestCacheBoundsAndExpiry(t *testing.T) {
	c := newCache(16)
	now := time.Now()
	a := netip.MustParseAddr("198.51.100.1")
	c.add("sb", "short.test", []netip.Addr{a}, now.Add(-time.Second)) // already expired
	c.add("sb", "long.test", []netip.Addr{netip.MustParseAddr("::ffff:198.51.100.1")}, now.Add(time.Hour))
	if got := c.names("sb", a, now); !slices.Equal(got, []string{"long.test"}) {
		t.Errorf("names = %v, want only the unexpired, unmapped one", got)
	}
	// Extending keeps the later expiry; a shorter answer does not shorten it.
	c.add("sb", "long.test", []netip.Addr{a}, now.Add(time.Minute))
	if got := c.names("sb", a, now.Add(30*time.Minute)); len(got) != 1 {
		t.Errorf("expiry shortened: %v", got)
	}
	for i := range 100 {
		c.add("sb", fmt.Sprintf("n%d.test", i), []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})}, now.Add(time.Hour))
	}
	sc := c.sandboxes["sb"]
	total := 0
	for _, names := range sc.byAddr {
		total += len(names)
	}
	if sc.n > 16 || total != sc.n {
		t.Errorf("%d pairs (counted %d), bound 16", total, sc.n)
	}
	if got := c.names("sb", netip.AddrFrom4([4]byte{198, 51, 100, 99}), now); !slices.Equal(got, []string{"n99.test"}) {
		t.Errorf("latest pair evicted: %v", got)
	}
}
