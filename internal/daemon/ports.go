package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// portsDefaults checks --ports-listen and --ports-domain and fills the
// domain's default: localhost with the listener's port (Chromium and
// Firefox resolve every *.localhost name to the loopback address).
func (cfg *Config) portsDefaults() error {
	if cfg.PortsListen == "" {
		if cfg.PortsDomain != "" {
			return fmt.Errorf("--ports-domain needs --ports-listen")
		}
		return nil
	}
	_, port, err := net.SplitHostPort(cfg.PortsListen)
	if err != nil {
		return fmt.Errorf("--ports-listen %q: %w", cfg.PortsListen, err)
	}
	if cfg.PortsListen == cfg.Listen && port != "0" { // two port 0s bind two ports
		return fmt.Errorf("--ports-listen %q is the API's --listen: exposed ports must never share the API's (and the console's) origin", cfg.PortsListen)
	}
	if cfg.PortsDomain == "" {
		if port == "0" {
			return nil // localhost and the bound port, once listen binds it
		}
		cfg.PortsDomain = "localhost:" + port
	}
	if err := checkPortsDomain(cfg.PortsDomain); err != nil {
		return err
	}
	return cfg.checkPortsParent()
}

// checkPortsParent refuses a ports domain that shares a registrable
// domain with a host the console is opened under (--listen's, when it is
// a name, and each --console-host): a sandbox's page on the ports origin
// could set cookies for that domain, which browsers then send to the
// console (shadowing its session cookies where they are not __Host-
// ones, or filling its requests' headers until they are refused). With
// PortsSharedParentOK it warns instead.
func (cfg *Config) checkPortsParent() error {
	if cfg.Cluster.DB != "" {
		return nil // a cluster node serves no ports origin (handler)
	}
	hosts := []string{}
	if h, _, err := net.SplitHostPort(cfg.Listen); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	for _, h := range cfg.ConsoleHosts {
		if h == "" || strings.ContainsAny(h, "/@ ") {
			return fmt.Errorf("--console-host %q: want a host name, as browsers show it (no scheme or path)", h)
		}
		hosts = append(hosts, h)
	}
	for _, h := range hosts {
		parent := sharedParent(h, cfg.PortsDomain)
		if parent == "" {
			continue
		}
		if !cfg.PortsSharedParentOK {
			return fmt.Errorf("--ports-domain %s and the console's host %s share the registrable domain %s: a sandbox's page on <port>-<id>.%s could set cookies for %s that browsers send to the console (a denial of service of the console); serve exposed ports under a registrable domain of their own (one that is not under %s), or pass --ports-domain-shared-parent-ok to accept it",
				cfg.PortsDomain, hostOf(h), parent, cfg.PortsDomain, parent, parent)
		}
		log := cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("the ports domain shares a registrable domain with the console's host (--ports-domain-shared-parent-ok): a sandbox's page can set cookies for it that browsers send to the console, shadowing its session over plain HTTP or filling its requests' headers until they are refused; serve exposed ports under a registrable domain of their own",
			"op", "init", "ports_domain", cfg.PortsDomain, "console_host", hostOf(h), "shared_domain", parent)
	}
	return nil
}

// sharedParent is the registrable domain (eTLD+1, by the public suffix
// list browsers use for cookies) that consoleHost and the hosts
// <port>-<id>.<portsDomain> share, or "" when they share none: an
// address, localhost, a single label or a name under a public suffix has
// no parent a cookie can be set on. Either may carry a port.
func sharedParent(consoleHost, portsDomain string) string {
	console := hostOf(consoleHost)
	if console == "" || net.ParseIP(console) != nil {
		return ""
	}
	// A host of the ports origin, not the domain itself: a domain that is
	// a public suffix gives each port a registrable domain of its own.
	ports := "0-x." + hostOf(portsDomain)
	a, err := publicsuffix.EffectiveTLDPlusOne(console)
	if err != nil {
		return ""
	}
	b, err := publicsuffix.EffectiveTLDPlusOne(ports)
	if err != nil || a != b {
		return ""
	}
	return a
}

// hostOf is h without a port, brackets or a trailing dot, lowercased.
func hostOf(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return strings.ToLower(h)
}

// checkPortsDomain accepts a DNS name of at least one label, with an
// optional port: what a browser URL's host part may be, without a scheme,
// path or user.
func checkPortsDomain(d string) error {
	host := d
	if h, p, err := net.SplitHostPort(d); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--ports-domain %q: %q is not a TCP port", d, p)
		}
		host = h
	}
	if host == "" || len(host) > 200 || net.ParseIP(host) != nil {
		return fmt.Errorf("--ports-domain %q: want a DNS name (each port gets <port>-<id>.<domain>), not an address", d)
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") ||
			strings.IndexFunc(label, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
			}) >= 0 {
			return fmt.Errorf("--ports-domain %q: %q is not a DNS label", d, label)
		}
	}
	return nil
}
