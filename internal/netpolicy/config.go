package netpolicy

import (
	"fmt"
	"log/slog"
	"math/bits"
	"net/netip"
	"path/filepath"

	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
)

// Defaults for Config's zero fields.
var (
	DefaultPool       = netip.MustParsePrefix("10.88.0.0/16")
	DefaultTable      = "corral"
	DefaultLinkPrefix = "crl"
)

// DefaultLogGroup is the NFLOG group denials are logged to when
// Config.LogGroup is 0.
const DefaultLogGroup = 7717

// The per-sandbox rate limit on logged denials: beyond it a denied packet
// is still refused and counted, but not logged, so a sandbox cannot flood
// the daemon or its event log. After a quiet period a sandbox gets a burst
// of at most LogRate+LogBurst logged denials (exactly LogBurst on the
// Linux 6.18 where this was measured), then LogRate a second.
const (
	LogRate  = 50  // logged denials a second, per sandbox
	LogBurst = 100 // logged at once after a quiet period
)

// SandboxLink is the name of the sandbox's end of the veth, inside its
// namespace.
const SandboxLink = "eth0"

// Config is the host-wide network configuration.
type Config struct {
	// StateDir holds the namespace mounts (<StateDir>/netns/<id>) and the
	// per-sandbox state files (<StateDir>/slots/<id>.json). Required.
	StateDir string
	// Pool is split into /30s, one per sandbox: .1 is the host side
	// (gateway), .2 the sandbox. IPv4, at most a /30. Default 10.88.0.0/16.
	Pool netip.Prefix
	// Table is the nftables inet table Corral owns. Default "corral".
	Table string
	// LinkPrefix starts the name of every host-side veth; every rule on a
	// host hook is restricted to interfaces with this prefix, so it must
	// not be the start of any other interface's name. Default "crl".
	LinkPrefix string
	// OperatorAllowed re-opens parts of policy.AlwaysDenied and of the
	// host's networks (IPv4) for every sandbox. Other sandboxes and the
	// host's own addresses stay denied.
	OperatorAllowed []netip.Prefix
	// DNSPort is where the daemon's resolver listens on each gateway; all
	// sandbox traffic to port 53 is DNATed there. 0: no DNS steering.
	DNSPort uint16
	// ProxyPort is where the daemon's transparent egress proxy listens on
	// each gateway; every new TCP connection the address policy allows is
	// DNATed there. 0: no proxy, TCP is forwarded (NAT) after the filter.
	ProxyPort uint16
	// LogGroup is the NFLOG group that the rules refusing a packet log to
	// when Decide is set (the first packet of a flow, rate limited per
	// sandbox). Only one socket per host (network namespace) can read a
	// group. Default DefaultLogGroup.
	LogGroup uint16
	// Decide, when set, receives a Decision (Allowed false, Via
	// "nftables") for every logged denial: New binds LogGroup and reads it
	// until Close. It is called from one goroutine and must not block; a
	// slow Decide makes the kernel drop log messages, which are counted
	// (LostDecisions) and logged. Nil: no reader and no log rules (denials
	// are still refused and counted).
	Decide func(policy.Decision)
	// Logger receives lifecycle logs. Default: discard.
	Logger *slog.Logger
}

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.StateDir == "" {
		return c, errdefs.Invalid("state_dir", "required")
	}
	c.StateDir = filepath.Clean(c.StateDir)
	if !c.Pool.IsValid() {
		c.Pool = DefaultPool
	}
	c.Pool = c.Pool.Masked()
	if !c.Pool.Addr().Is4() || c.Pool.Bits() > 30 || c.Pool.Bits() < 8 {
		return c, errdefs.Invalid("pool", "%v: need an IPv4 range between /8 and /30", c.Pool)
	}
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if len(c.Table) > 64 {
		return c, errdefs.Invalid("table", "%q is too long", c.Table)
	}
	if c.LinkPrefix == "" {
		c.LinkPrefix = DefaultLinkPrefix
	}
	if err := checkLinkPrefix(c.LinkPrefix, c.Pool); err != nil {
		return c, err
	}
	for _, p := range c.OperatorAllowed {
		if !p.IsValid() {
			return c, errdefs.Invalid("operator_allowed", "invalid range %v", p)
		}
	}
	if c.DNSPort != 0 && c.DNSPort == c.ProxyPort {
		return c, errdefs.Invalid("proxy_port", "same as dns_port %d", c.DNSPort)
	}
	if c.LogGroup == 0 {
		c.LogGroup = DefaultLogGroup
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// checkLinkPrefix makes sure prefix plus the widest slot index fits in an
// interface name and that the prefix is specific enough for wildcard
// rules.
func checkLinkPrefix(prefix string, pool netip.Prefix) error {
	if len(prefix) < 3 {
		return errdefs.Invalid("link_prefix", "%q: at least 3 characters, so wildcard rules stay specific", prefix)
	}
	for _, r := range prefix {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return errdefs.Invalid("link_prefix", "%q: lowercase letters and digits only", prefix)
		}
	}
	if n := len(prefix) + hexDigits(slotCount(pool)-1); n > 15 {
		return errdefs.Invalid("link_prefix", "%q: link names would be %d characters, the limit is 15", prefix, n)
	}
	return nil
}

// slotCount is how many /30s the pool holds.
func slotCount(pool netip.Prefix) uint32 { return 1 << (30 - pool.Bits()) }

func hexDigits(v uint32) int {
	if v == 0 {
		return 1
	}
	return (bits.Len32(v) + 3) / 4
}

// hostLinkName is the host-side veth of slot index i.
func (c Config) hostLinkName(i uint32) string { return fmt.Sprintf("%s%x", c.LinkPrefix, i) }

// slotAddrs returns the /30, gateway and sandbox address of slot index i.
func (c Config) slotAddrs(i uint32) (prefix netip.Prefix, gw, addr netip.Addr) {
	base := c.Pool.Addr().As4()
	v := be32(base) + i*4
	net := netip.AddrFrom4(put32(v))
	return netip.PrefixFrom(net, 30), netip.AddrFrom4(put32(v + 1)), netip.AddrFrom4(put32(v + 2))
}

func be32(b [4]byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func put32(v uint32) [4]byte { return [4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

func (c Config) netnsDir() string { return filepath.Join(c.StateDir, "netns") }
func (c Config) slotsDir() string { return filepath.Join(c.StateDir, "slots") }
