package daemon

import (
	"fmt"
	"net"
	"strconv"
	"strings"
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
	if cfg.PortsListen == cfg.Listen {
		return fmt.Errorf("--ports-listen %q is the API's --listen: exposed ports must never share the API's (and the console's) origin", cfg.PortsListen)
	}
	if cfg.PortsDomain == "" {
		if port == "0" {
			return fmt.Errorf("--ports-listen %q has no fixed port: give --ports-domain (the host:port browsers reach it on)", cfg.PortsListen)
		}
		cfg.PortsDomain = "localhost:" + port
	}
	return checkPortsDomain(cfg.PortsDomain)
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
