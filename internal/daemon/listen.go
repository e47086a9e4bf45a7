package daemon

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"

	"corral/internal/cluster/node"
	"corral/internal/readyfile"
)

// listeners are the daemon's listening sockets. They are bound before
// anything else starts, so that an address given with port 0 has its
// real port for what needs it (the ports origin's default domain, the
// ready file) and a daemon that cannot bind fails before it touches its
// state. Connections that come before the servers start wait in the
// kernel's backlog.
type listeners struct {
	api, envd, ports, metrics net.Listener
}

// listen binds every listener cfg names (checked by defaults); an
// address given with port 0 gets the bound port (its host stays as given:
// a name there is what the console is opened under), and a ports origin
// on port 0 without a domain gets localhost and that port.
func listen(cfg *Config) (*listeners, error) {
	if cfg.Listen == "" {
		return nil, fmt.Errorf("--listen is required (the API's address)")
	}
	l := &listeners{}
	for _, b := range []struct {
		addr *string
		ln   *net.Listener
		flag string
	}{
		{&cfg.Listen, &l.api, "--listen"},
		{&cfg.EnvdListen, &l.envd, "--envd-listen"},
		{&cfg.PortsListen, &l.ports, "--ports-listen"},
		{&cfg.MetricsListen, &l.metrics, "--metrics-listen"},
	} {
		if *b.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", *b.addr)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("listening on %s (%s): %w", *b.addr, b.flag, err)
		}
		*b.ln, *b.addr = ln, boundPort(*b.addr, ln.Addr())
	}
	if cfg.PortsListen != "" && cfg.PortsDomain == "" { // it said port 0
		_, port, _ := net.SplitHostPort(cfg.PortsListen)
		cfg.PortsDomain = "localhost:" + port
	}
	return l, nil
}

// nodeURLs gives a cluster node's advertised URLs (--node-address, and
// the envd face's) the bound ports where they say port 0.
func (l *listeners) nodeURLs(c *node.Config) {
	c.Address = urlBoundPort(c.Address, l.api)
	c.EnvdAddress = urlBoundPort(c.EnvdAddress, l.envd)
}

// urlBoundPort is the URL u with port 0 replaced by ln's port.
func urlBoundPort(u string, ln net.Listener) string {
	p, err := url.Parse(u)
	if err != nil || p.Port() != "0" || ln == nil {
		return u
	}
	p.Host = boundPort(p.Host, ln.Addr())
	return p.String()
}

// boundPort is addr with port 0 replaced by the port bound.
func boundPort(addr string, bound net.Addr) string {
	host, port, err := net.SplitHostPort(addr)
	tcp, ok := bound.(*net.TCPAddr)
	if err != nil || port != "0" || !ok {
		return addr
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

func (l *listeners) close() {
	for _, ln := range []net.Listener{l.api, l.envd, l.ports, l.metrics} {
		if ln != nil {
			ln.Close()
		}
	}
}

// Ready is what --ready-file holds once the daemon serves: the bound
// addresses (a listener given port 0 has its real one) and the pid.
type Ready struct {
	Listen        string `json:"listen"`
	EnvdListen    string `json:"envd_listen,omitempty"`
	PortsListen   string `json:"ports_listen,omitempty"`
	PortsDomain   string `json:"ports_domain,omitempty"`
	MetricsListen string `json:"metrics_listen,omitempty"`
	PID           int    `json:"pid"`
}

// writeReady writes cfg's bound addresses to path (readyfile).
func writeReady(path string, cfg Config) error {
	return readyfile.Write(path, Ready{Listen: cfg.Listen, EnvdListen: cfg.EnvdListen, PortsListen: cfg.PortsListen,
		PortsDomain: cfg.PortsDomain, MetricsListen: cfg.MetricsListen, PID: os.Getpid()})
}
