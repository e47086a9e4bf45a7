package netpolicy

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
)

// TestRestart: a new Network over the same state (a daemon restart after
// a crash) keeps running sandboxes working, knows them, and detaches them.
func TestRestart(t *testing.T) {
	e := newTestEnv(t, nil)
	e.world()
	ctx := context.Background()
	s := e.attach("sb-survivoraaaaaaaa", policy.Policy{CIDRAllowlist: []netip.Prefix{public}})
	dst := netip.AddrPortFrom(internet1, echoPort)
	if _, err := tcpHello(s.NetnsPath, dst, dropWait); err != nil {
		t.Fatalf("before restart: %v", err)
	}
	tcpHello(s.NetnsPath, netip.AddrPortFrom(internal, echoPort), dropWait) // one denial
	before, err := e.net.Denials(s.ID)
	if err != nil || before == 0 {
		t.Fatalf("Denials = %d, %v", before, err)
	}

	// An orphaned link with the prefix (a crash after the link, before the
	// state file) and a half-made slot (a crash mid-Attach).
	orphan := e.cfg.hostLinkName(slotCount(e.cfg.Pool) - 1)
	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: orphan}, PeerName: "cx" + e.suffix + "o"}))
	t.Cleanup(func() { deleteLink(orphan) })
	half, err := e.net.lease("sb-halfaaaaaaaaaaaa", policy.Policy{})
	must(t, err)
	must(t, writeState(e.cfg, half))
	must(t, e.net.installSandbox(half))
	must(t, createNetns(half.NetnsPath))

	// The old Network is abandoned, as by a crash, which would also close
	// its nflog socket (the group can have one reader).
	must(t, e.net.Close())
	n2, err := New(ctx, e.cfg)
	if err != nil {
		t.Fatalf("New after crash: %v", err)
	}
	e.net = n2
	if linkExists(orphan) {
		t.Errorf("orphaned link %s survived New", orphan)
	}
	if id, p, ok := n2.Lookup(s.Addr); !ok || id != s.ID || len(p.CIDRAllowlist) != 1 {
		t.Errorf("Lookup after restart = %q, %+v, %v", id, p, ok)
	}
	if got, ok := n2.Slot(s.ID); !ok || got != *s.Slot {
		t.Errorf("Slot after restart = %+v, %v", got, ok)
	}
	if _, err := tcpHello(s.NetnsPath, dst, dropWait); err != nil {
		t.Errorf("after restart: %v", err)
	}
	if _, err := tcpHello(s.NetnsPath, netip.AddrPortFrom(internet2, echoPort), dropWait); err == nil {
		t.Error("after restart the CIDR allowlist is gone")
	}
	if after, _ := n2.Denials(s.ID); after <= before {
		t.Errorf("denials after restart %d, before %d: counters not carried over", after, before)
	}
	ids, err := n2.List()
	if err != nil || len(ids) != 2 {
		t.Errorf("List = %v, %v", ids, err)
	}
	s.close()
	for _, id := range ids {
		if err := n2.Detach(ctx, id); err != nil {
			t.Errorf("Detach(%s): %v", id, err)
		}
	}
	e.checkNoLeftovers(false)
}

// TestAttachErrors: bad input is refused with the right kind, and a
// failing Attach leaves nothing behind.
func TestAttachErrors(t *testing.T) {
	e := newTestEnv(t, nil)
	ctx := context.Background()
	if _, err := e.net.Attach(ctx, "../x", policy.Policy{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad id: %v", err)
	}
	if _, err := e.net.Attach(ctx, "sb-badaaaaaaaaaaaaa", policy.Policy{BlockNetwork: true, DomainAllowlist: []string{"a.test"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad policy: %v", err)
	}
	if err := e.net.SetPolicy(ctx, "sb-noneaaaaaaaaaaaa", policy.Policy{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("SetPolicy(unknown): %v", err)
	}
	if err := e.net.AllowResolved("sb-noneaaaaaaaaaaaa", []netip.Addr{internet1}, time.Minute); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("AllowResolved(unknown): %v", err)
	}
	s := e.attach("sb-dupaaaaaaaaaaaaa", policy.Policy{})
	if _, err := e.net.Attach(ctx, s.ID, policy.Policy{}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate: %v", err)
	}
	s.close()
	must(t, e.net.Detach(ctx, s.ID))

	// Something already sits where the namespace should be mounted: the
	// namespace step fails after the state file and the rules exist.
	must(t, os.WriteFile(filepath.Join(e.cfg.netnsDir(), "sb-failaaaaaaaaaaaa"), nil, 0o600))
	if _, err := e.net.Attach(ctx, "sb-failaaaaaaaaaaaa", policy.Policy{}); err == nil {
		t.Fatal("Attach over an existing namespace file succeeded")
	}
	e.checkNoLeftovers(false)

	must(t, e.net.Close())
	if _, err := e.net.Attach(ctx, "sb-lateaaaaaaaaaaaa", policy.Policy{}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Attach after Close: %v", err)
	}
}
