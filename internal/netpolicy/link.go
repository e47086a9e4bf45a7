package netpolicy

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
)

// createNetns creates a network namespace with IPv6 disabled and
// bind-mounts it at path.
func createNetns(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("creating mount point: %w", err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it ends with this goroutine
		// instead of returning to the scheduler in the new namespace.
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("unshare: %w", err)
			}
			// /proc/sys/net belongs to the namespace of the thread using it.
			for _, k := range []string{"all", "default"} {
				if err := disableIPv6(k); err != nil {
					return err
				}
			}
			src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
			if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind-mounting %s: %w", src, err)
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// removeNetns unmounts and removes a namespace mount; a missing or
// unmounted one is not an error.
func removeNetns(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// setupLinks creates the veth pair (host side named s.HostLink, the peer
// created directly inside the namespace), addresses both ends, and gives
// the namespace its loopback and default route.
func setupLinks(s *slotState) error {
	ns, err := netns.GetFromPath(s.NetnsPath)
	if err != nil {
		return fmt.Errorf("opening %s: %w", s.NetnsPath, err)
	}
	defer ns.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: s.HostLink},
		PeerName:      s.SandboxLink,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s: %w", s.HostLink, err)
	}
	if err := setupHostSide(s); err != nil {
		return err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", s.NetnsPath, err)
	}
	defer h.Close()
	if err := setupSandboxSide(h, s); err != nil {
		return err
	}
	// The kernel attaches a link's queueing discipline asynchronously once
	// both ends are up; until then it drops what it sends (the first ARP
	// reply, costing the sandbox's first connection a second). Operstate
	// is set in the same step, so wait for it on both ends.
	for _, w := range []struct {
		h    *netlink.Handle
		name string
	}{{nil, s.HostLink}, {h, s.SandboxLink}} {
		if err := waitUp(w.h, w.name); err != nil {
			return err
		}
	}
	return nil
}

// waitUp waits until the link's operational state is up.
func waitUp(h *netlink.Handle, name string) error {
	if h == nil {
		h = &netlink.Handle{}
	}
	deadline := time.Now().Add(linkUpTimeout)
	for {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("finding %s: %w", name, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s is %v after %v", name, l.Attrs().OperState, linkUpTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

const linkUpTimeout = 5 * time.Second

func setupHostSide(s *slotState) error {
	if err := disableIPv6(s.HostLink); err != nil {
		return err
	}
	if err := writeSysctl("net/ipv4/conf/"+s.HostLink+"/rp_filter", "1"); err != nil {
		return err
	}
	link, err := netlink.LinkByName(s.HostLink)
	if err != nil {
		return fmt.Errorf("finding %s: %w", s.HostLink, err)
	}
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipNet(s.Gateway, s.Prefix.Bits())}); err != nil {
		return fmt.Errorf("addressing %s: %w", s.HostLink, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing up %s: %w", s.HostLink, err)
	}
	return nil
}

func setupSandboxSide(h *netlink.Handle, s *slotState) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo in %s: %w", s.NetnsPath, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bringing up lo: %w", err)
	}
	return addressSandboxLink(h, s)
}

// addressSandboxLink gives the sandbox's interface its address and
// default route and brings it up; it replaces what is there, so it also
// restores them (Readdress).
func addressSandboxLink(h *netlink.Handle, s *slotState) error {
	eth, err := h.LinkByName(s.SandboxLink)
	if err != nil {
		return fmt.Errorf("finding %s in %s: %w", s.SandboxLink, s.NetnsPath, err)
	}
	if err := h.AddrReplace(eth, &netlink.Addr{IPNet: ipNet(s.Addr, s.Prefix.Bits())}); err != nil {
		return fmt.Errorf("addressing %s: %w", s.SandboxLink, err)
	}
	if err := h.LinkSetUp(eth); err != nil {
		return fmt.Errorf("bringing up %s: %w", s.SandboxLink, err)
	}
	def := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: net.IP(s.Gateway.AsSlice()), Family: unix.AF_INET}
	if err := h.RouteReplace(def); err != nil {
		return fmt.Errorf("default route via %v: %w", s.Gateway, err)
	}
	return nil
}

// deleteLink deletes a host link; a missing one is not an error.
func deleteLink(name string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("finding %s: %w", name, err)
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}

func linkExists(name string) bool {
	_, err := netlink.LinkByName(name)
	return err == nil
}

func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, a.BitLen())}
}

// disableIPv6 turns IPv6 off for a link (or "all"/"default"); a kernel
// without IPv6 has nothing to turn off.
func disableIPv6(link string) error {
	err := writeSysctl("net/ipv6/conf/"+link+"/disable_ipv6", "1")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// writeSysctl writes /proc/sys/<key>, in the calling thread's namespace.
func writeSysctl(key, value string) error {
	p := filepath.Join("/proc/sys", key)
	if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) == value {
		return nil
	}
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("setting %s=%s: %w", strings.ReplaceAll(key, "/", "."), value, err)
	}
	return nil
}

// Readdress gives sandbox id's interface in its namespace its address
// and default route again, as Attach left them: a runtime may take them
// off when it starts (runsc's netstack takes the interface over and
// strips its addresses so the host's stack never answers for the
// sandbox), and a sandbox started again in the same slot (a reboot after
// a filesystem-only pause) needs them to find its network. Idempotent.
func (n *Network) Readdress(id string) error {
	n.mu.RLock()
	s, ok := n.slots[id]
	n.mu.RUnlock()
	if !ok {
		return fmt.Errorf("readdressing sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	ns, err := netns.GetFromPath(s.NetnsPath)
	if err != nil {
		return fmt.Errorf("opening %s: %w", s.NetnsPath, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", s.NetnsPath, err)
	}
	defer h.Close()
	return addressSandboxLink(h, s)
}
