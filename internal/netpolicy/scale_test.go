package netpolicy

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/nftables"

	"corral/internal/ids"
	"corral/internal/netpolicy/policy"
)

// TestRebuildManySandboxes: a restart rebuilds the table of 400 recorded
// sandboxes in one transaction (≈ 5 MiB and 21,600 acks, past the
// default socket buffers and this host's caps), and detaches them all.
func TestRebuildManySandboxes(t *testing.T) {
	const n = 400
	e := newTestEnv(t, func(c *Config) { c.Pool = netip.PrefixFrom(c.Pool.Addr(), 21).Masked() })
	for range n {
		s, err := e.net.lease(ids.NewSandbox(), policy.Policy{})
		must(t, err)
		must(t, writeState(e.cfg, s))
		e.net.register(s)
	}
	must(t, e.net.Close())
	n2, err := New(context.Background(), e.cfg)
	if err != nil {
		t.Fatalf("New over %d sandboxes: %v", n, err)
	}
	e.net = n2
	c, err := newConn()
	must(t, err)
	for _, m := range []string{natLinksMap, inLinksMap, fwdLinksMap} {
		els, err := c.GetSetElements(&nftables.Set{Table: n2.table(), Name: m, IsMap: true, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict})
		must(t, err)
		if len(els) != n {
			t.Errorf("map %s has %d elements after the rebuild, want %d", m, len(els), n)
		}
	}
	// The cleanup's Teardown detaches all of them and checks for leftovers.
}

// TestDetachHalfRemoved: Detach removes a slot some of whose objects are
// already gone (the by-name removal fails; what is left is found and
// removed).
func TestDetachHalfRemoved(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.attach("sb-halfaaaaaaaaaaaa", policy.Policy{})
	s.close()
	st := e.net.slots[s.ID]
	c, err := newConn()
	must(t, err)
	r := e.net.refs()
	must(t, c.SetDeleteElements(r.natLinks, []nftables.SetElement{{Key: ifname(st.HostLink)}}))
	must(t, c.Flush())
	if err := e.net.Detach(context.Background(), s.ID); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	e.checkNoLeftovers(false)
}
