package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"corral/internal/manager"
	"corral/internal/netpolicy"
	"corral/internal/netpolicy/dnsd"
	"corral/internal/netpolicy/egress"
	"corral/internal/netpolicy/policy"
)

// NetConfig is the network layer's part of the daemon's config.
type NetConfig struct {
	Disabled        bool         // sandboxes get no network at all
	Pool            netip.Prefix // sandbox addresses, a /30 each
	Table           string       // nftables table
	LinkPrefix      string       // host-side veth names
	DNSPort         uint16       // the resolver's port on each gateway
	ProxyPort       uint16       // the egress proxy's port on each gateway
	OperatorAllowed []netip.Prefix
	DNSUpstream     []string // host:port; default: the host's resolv.conf
	LogGroup        uint16   // NFLOG group of the kernel's refusals
}

// network is the running network layer: kernel rules, resolver, proxy.
type network struct {
	layer *netpolicy.Network
	dns   *dnsd.Server
	proxy *egress.Proxy
}

// startNetwork sets up the kernel layer and serves the resolver and the
// egress proxy. record receives every egress decision (for the event log);
// it is bound after the manager exists, hence the pointer.
func startNetwork(ctx context.Context, stateDir string, cfg NetConfig, shares Shares, record *atomic.Pointer[func(policy.Decision)], sec *secretEgress, log *slog.Logger) (*network, error) {
	decide := func(d policy.Decision) {
		if d.Time.IsZero() {
			d.Time = time.Now()
		}
		if f := record.Load(); f != nil {
			(*f)(d)
		}
	}
	layer, err := netpolicy.New(ctx, netpolicy.Config{
		StateDir: filepath.Join(stateDir, "net"), Pool: cfg.Pool, Table: cfg.Table, LinkPrefix: cfg.LinkPrefix,
		OperatorAllowed: cfg.OperatorAllowed, DNSPort: cfg.DNSPort, ProxyPort: cfg.ProxyPort, Logger: log,
		Decide: decide, LogGroup: cfg.LogGroup,
	})
	if err != nil {
		return nil, fmt.Errorf("network layer: %w", err)
	}
	n := &network{layer: layer}
	n.dns, err = dnsd.New(dnsd.Config{
		Lookup: layer.Lookup, Decide: decide, OperatorAllowed: cfg.OperatorAllowed, HostNetwork: layer.HostNetwork, Logger: log, Upstream: cfg.DNSUpstream,
		MaxInFlightTotal: shares.DNSInFlight, MaxInFlight: shares.DNSInFlightPerSandbox, GuaranteedInFlight: shares.DNSGuaranteedInFlight,
		OnResolved: func(id, _ string, addrs []netip.Addr, ttl time.Duration) {
			if err := layer.AllowResolved(id, addrs, ttl); err != nil {
				log.Warn("opening resolved addresses", "sandbox", id, "err", err)
			}
		},
	})
	if err != nil {
		n.close()
		return nil, fmt.Errorf("dns resolver: %w", err)
	}
	n.proxy, err = egress.New(egress.Config{
		Lookup: layer.Lookup, Decide: decide, Resolved: n.dns.ResolvedNames,
		OperatorAllowed: cfg.OperatorAllowed, HostNetwork: layer.HostNetwork, Deny: []netip.Prefix{poolOf(cfg)}, Logger: log,
		MaxConns: shares.EgressConns, MaxConnsPerSandbox: shares.EgressConnsPerSandbox, GuaranteedConns: shares.EgressGuaranteedConns,
		Intercept: sec.intercept, Injected: sec.injected, UpstreamRoots: sec.roots,
	})
	if err != nil {
		n.close()
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	if err := n.serve(ctx, cfg); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

func poolOf(cfg NetConfig) netip.Prefix {
	if cfg.Pool.IsValid() {
		return cfg.Pool
	}
	return netpolicy.DefaultPool
}

// serve listens on the wildcard address: the kernel layer DNATs sandbox
// traffic to each gateway, and its input rules keep everything but Corral's
// veths off these ports.
func (n *network) serve(ctx context.Context, cfg NetConfig) error {
	dnsAddr := net.JoinHostPort("0.0.0.0", strconv.Itoa(int(cfg.DNSPort)))
	pc, err := net.ListenPacket("udp4", dnsAddr)
	if err != nil {
		return fmt.Errorf("resolver: %w", err)
	}
	tl, err := net.Listen("tcp4", dnsAddr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("resolver: %w", err)
	}
	pl, err := net.Listen("tcp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(cfg.ProxyPort))))
	if err != nil {
		pc.Close()
		tl.Close()
		return fmt.Errorf("egress proxy: %w", err)
	}
	go n.dns.Serve(ctx, pc, tl)
	go n.proxy.Serve(ctx, pl)
	return nil
}

// networking is what the manager needs of the layer.
func (n *network) networking() *manager.Networking {
	return &manager.Networking{Layer: n.layer, Forget: n.dns.Forget}
}

func (n *network) close() {
	if n.proxy != nil {
		n.proxy.Close()
	}
	if n.dns != nil {
		n.dns.Close()
	}
	if n.layer != nil {
		n.layer.Close()
	}
}
