package agent

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/fspath"
)

// ioctls of /dev/urandom (linux/random.h).
const (
	rndAddEntropy  = 0x40085203 // _IOW('R', 0x03, int[2])
	rndReseedCRNG  = 0x5207     // _IO('R', 0x07)
	bootIDPath     = "/proc/sys/kernel/random/boot_id"
	bootIDDir      = "/.corral" // the agent's own directory
	machineIDPath  = "/etc/machine-id"
	maxHostnameLen = 64
)

var (
	hostnamePattern  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
	machineIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)
	uuidPattern      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// identity is POST /v1/identity (agentapi.IdentityRequest).
func (s *Server) identity(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.IdentityRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := checkIdentity(&req); err != nil {
		return err
	}
	var res agentapi.IdentityResult
	if req.Hostname != "" {
		if err := setHostname(req.Hostname); err != nil {
			return err
		}
		if err := writeHostFiles(s.root, req.Hostname); err != nil {
			return fmt.Errorf("writing /etc/hostname and /etc/hosts: %w", err)
		}
	}
	if req.MachineID != "" {
		if err := s.writeRootFile(machineIDPath, req.MachineID+"\n", 0o444); err != nil {
			return fmt.Errorf("writing %s: %w", machineIDPath, err)
		}
	}
	if len(req.Entropy) > 0 {
		res.RNG = reseed(req.Entropy)
	}
	if req.BootID != "" {
		if err := s.mountBootID(req.BootID); err != nil {
			// gVisor: no CAP_SYS_ADMIN here; the runtime mounts it
			// (runtime.BootIDSetter, `corral agent boot-id`).
			s.log.Info("boot_id not mounted by the agent", "op", "identity", "err", err)
		} else {
			res.BootID = true
		}
	}
	if req.Network != nil {
		changed, err := moveAddress(req.Network)
		if err != nil {
			return err
		}
		res.Network = changed
	}
	if len(req.Nameservers) > 0 {
		addrs := make([]netip.Addr, len(req.Nameservers))
		for i, ns := range req.Nameservers {
			addrs[i], _ = netip.ParseAddr(ns) // checked
		}
		if err := writeResolvConf(s.root, addrs); err != nil {
			return fmt.Errorf("writing resolv.conf: %w", err)
		}
	}
	s.log.Info("identity applied", "op", "identity", "hostname", req.Hostname, "rng", res.RNG,
		"boot_id", res.BootID, "network", res.Network)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// checkIdentity validates every field of req.
func checkIdentity(req *agentapi.IdentityRequest) error {
	if h := req.Hostname; h != "" && (len(h) > maxHostnameLen || !hostnamePattern.MatchString(h)) {
		return errdefs.Invalid("hostname", "%q is not a hostname", h)
	}
	if req.MachineID != "" && !machineIDPattern.MatchString(req.MachineID) {
		return errdefs.Invalid("machine_id", "want 32 lowercase hex digits")
	}
	if req.BootID != "" && !uuidPattern.MatchString(req.BootID) {
		return errdefs.Invalid("boot_id", "want a lowercase UUID")
	}
	if n := len(req.Entropy); n > 0 && (n < agentapi.MinEntropy || n > agentapi.MaxEntropy) {
		return errdefs.Invalid("entropy", "%d bytes; want %d to %d", n, agentapi.MinEntropy, agentapi.MaxEntropy)
	}
	if n := req.Network; n != nil {
		if p, err := netip.ParsePrefix(n.Address); err != nil || !p.Addr().Is4() {
			return errdefs.Invalid("network.address", "%q is not an IPv4 CIDR", n.Address)
		}
		if a, err := netip.ParseAddr(n.Gateway); err != nil || !a.Is4() {
			return errdefs.Invalid("network.gateway", "%q is not an IPv4 address", n.Gateway)
		}
	}
	for _, ns := range req.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			return errdefs.Invalid("nameservers", "%q is not an address", ns)
		}
	}
	return nil
}

// setHostname sets the kernel's hostname unless it is already h (gVisor
// restores a sandbox with the new spec's hostname and gives the agent no
// CAP_SYS_ADMIN to set it).
func setHostname(h string) error {
	if cur, err := os.Hostname(); err == nil && cur == h {
		return nil
	}
	if err := unix.Sethostname([]byte(h)); err != nil {
		return fmt.Errorf("setting the hostname: %w", err)
	}
	return nil
}

// reseed mixes entropy into the kernel's pool and reseeds its CRNG, so
// that copies of one memory snapshot stop producing the same stream. It
// returns "reseeded", or "host" where /dev/urandom has no pool of its own
// to reseed (gVisor reads the host's RNG for every request).
func reseed(entropy []byte) string {
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	buf := make([]byte, 8+len(entropy)+3)
	*(*int32)(unsafe.Pointer(&buf[0])) = int32(len(entropy) * 8)
	*(*int32)(unsafe.Pointer(&buf[4])) = int32(len(entropy))
	copy(buf[8:], entropy)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndAddEntropy, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		_, _ = f.Write(entropy)
		return "host"
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndReseedCRNG, 0); e != 0 {
		return "mixed"
	}
	return "reseeded"
}

// mountBootID shows id at bootIDPath: a new file holding it, in the
// agent's own directory, is bind-mounted over the kernel's file (whose
// value the snapshot froze; under gVisor each procfs instance has its own
// random one, kept by a checkpoint), then unlinked: the mount holds it,
// and nothing is left in the directory (a gVisor sandbox's /.corral is in
// its writable layer, which exports carry). (A memfd cannot be the
// source: it is on no mount of this namespace.) It needs CAP_SYS_ADMIN.
func (s *Server) mountBootID(id string) error {
	dir, err := fspath.ResolveNoFollow(s.root, bootIDDir)
	if err != nil {
		return err
	}
	target, err := fspath.Resolve(s.root, bootIDPath)
	if err != nil {
		return err
	}
	_ = unix.Unmount(target, unix.MNT_DETACH) // an earlier identity's
	f, err := os.CreateTemp(dir, ".boot_id-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Chmod(0o444)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return unix.Mount(f.Name(), target, "", unix.MS_BIND, "")
}

// moveAddress gives the interface holding the sandbox's IPv4 address the
// new one and routes through the new gateway; it reports whether anything
// changed (a runtime may have moved the address itself).
func moveAddress(n *agentapi.IdentityNetwork) (bool, error) {
	want, err := netlink.ParseAddr(n.Address)
	if err != nil {
		return false, errdefs.Invalid("network.address", "%v", err)
	}
	link, old, err := globalAddr()
	if err != nil {
		return false, err
	}
	if old != nil && old.IPNet.String() == want.IPNet.String() {
		return false, nil
	}
	if old != nil {
		if err := netlink.AddrDel(link, old); err != nil {
			return false, fmt.Errorf("removing %s: %w", old.IPNet, err)
		}
	}
	if err := netlink.AddrAdd(link, want); err != nil {
		return false, fmt.Errorf("adding %s: %w", want.IPNet, err)
	}
	gw := net.ParseIP(n.Gateway)
	if err := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw}); err != nil {
		return false, fmt.Errorf("default route via %s: %w", gw, err)
	}
	return true, nil
}

// globalAddr finds the first non-loopback interface and its IPv4 address
// (nil when it has none).
func globalAddr() (netlink.Link, *netlink.Addr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, nil, err
	}
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return nil, nil, err
		}
		if len(addrs) > 0 {
			return l, &addrs[0], nil
		}
		return l, nil, nil
	}
	return nil, nil, errors.New("the sandbox has no network interface")
}

// writeRootFile replaces the file at path inside the agent's root (as
// root, through the upload path's atomic writer).
func (s *Server) writeRootFile(path, content string, mode uint32) error {
	host, err := fspath.ResolveNoFollow(s.root, path)
	if err != nil {
		return err
	}
	return s.writeAtomic(strings.NewReader(content), filepath.Dir(host), host, mode, rootAccount, false, nil)
}
