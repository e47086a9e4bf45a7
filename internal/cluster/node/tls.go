package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"

	"corral/internal/cluster/nodetls"
	"corral/internal/cluster/store"
)

// TLSConfig is a node's TLS, on its API and envd listeners and on its
// calls to other nodes.
type TLSConfig struct {
	// CertFile and KeyFile are the operator's certificate (both or
	// neither); without them the node makes its own key in its state
	// directory.
	CertFile, KeyFile string
	// CAFile, when set, makes the node check other nodes' certificates
	// against these CAs and their hosts instead of their pins.
	CAFile string
}

// httpsHosts checks that every address is an https:// URL and returns
// their hosts (the names a made certificate carries).
func httpsHosts(addrs ...string) ([]string, error) {
	var hosts []string
	for _, a := range addrs {
		if a == "" {
			continue
		}
		u, err := url.Parse(a)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("the node's address %q: want https://host:port (a node's listener serves TLS only)", a)
		}
		hosts = append(hosts, u.Hostname())
	}
	return hosts, nil
}

// loadTLS loads or makes the node's certificate and sets up the client
// its calls to other nodes go through.
func (n *Node) loadTLS() (string, error) {
	hosts, err := httpsHosts(n.cfg.Address, n.cfg.EnvdAddress)
	if err != nil {
		return "", err
	}
	cert, fp, err := nodetls.Load(n.cfg.StateDir, n.cfg.TLS.CertFile, n.cfg.TLS.KeyFile, hosts)
	if err != nil {
		return "", err
	}
	n.tls = nodetls.ServerConfig(cert)
	d, err := Dialer(n.st, n.cfg.TLS.CAFile)
	if err != nil {
		return "", err
	}
	n.client = &http.Client{Transport: d.Transport()}
	return fp, nil
}

// Dialer is how a caller of nodes checks them: by the pins in the
// cluster database st, or by the CAs in caFile when it is set.
func Dialer(st *store.Store, caFile string) (*nodetls.Dialer, error) {
	if caFile != "" {
		roots, err := nodetls.LoadCA(caFile)
		if err != nil {
			return nil, err
		}
		return &nodetls.Dialer{Roots: roots}, nil
	}
	return &nodetls.Dialer{Pins: func(ctx context.Context, hostport string) ([]nodetls.Pin, error) {
		pins, err := st.TLSPins(ctx, nodetls.URLCandidates(hostport))
		out := make([]nodetls.Pin, len(pins))
		for i, p := range pins {
			out[i] = nodetls.Pin{Node: p.Node, Fingerprint: p.Fingerprint}
		}
		return out, err
	}}, nil
}

// ServerTLS is the TLS configuration of the node's API and envd
// listeners.
func (n *Node) ServerTLS() *tls.Config { return n.tls }
