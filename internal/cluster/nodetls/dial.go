package nodetls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Pin is a node's registered fingerprint.
type Pin struct {
	Node        string
	Fingerprint string
}

// Dialer connects to nodes over TLS and checks who answers.
type Dialer struct {
	// Pins are the nodes registered at a host:port (their API or envd
	// address) with their fingerprints, read from the cluster database
	// at each new connection, so a node's new key counts as soon as it
	// registers it. Used when Roots is nil.
	Pins func(ctx context.Context, hostport string) ([]Pin, error)
	// Roots, when not nil, are the operator's CAs (--cluster-ca): a
	// node's certificate must chain to one of them and name the host it
	// is dialed at, and no pin is looked up.
	Roots *x509.CertPool
}

// ErrPlain refuses a plain-HTTP address for a node: nodes serve TLS.
var ErrPlain = errors.New("a node is reached over TLS only (https://): its address is http://, a node of an older corral, or an address someone else wrote")

// Transport is an HTTP/1.1 transport for calls to nodes: https:// through
// d, and http:// refused.
func (d *Dialer) Transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.ForceAttemptHTTP2 = false
	tr.MaxIdleConnsPerHost = 64
	tr.DialContext = func(context.Context, string, string) (net.Conn, error) { return nil, ErrPlain }
	tr.DialTLSContext = d.DialTLSContext
	return tr
}

// dialer is the TCP dial under TLS, and handshakeTimeout bounds the
// handshake (http.DefaultTransport's values).
var dialer = net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

const handshakeTimeout = 10 * time.Second

// DialTLSContext dials addr (host:port) and completes a TLS handshake
// that accepts the node's certificate only as d says.
func (d *Dialer) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, ServerName: host}
	if d.Roots != nil {
		cfg.RootCAs = d.Roots
	} else {
		pins, err := d.Pins(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("reading the TLS pin of the node at %s: %w", addr, err)
		}
		if len(pins) == 0 {
			return nil, fmt.Errorf("no node is registered at %s with a TLS fingerprint", addr)
		}
		// The chain is not what is checked: the pin is, in
		// VerifyConnection, which runs for every handshake.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return checkPin(cs, addr, pins) }
	}
	raw, err := dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(raw, cfg)
	// As http.Transport bounds its own handshakes: a listener that
	// accepts and never answers does not hold the call.
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, nil
}

// checkPin accepts the connection when the leaf certificate's key is
// one of pins'.
func checkPin(cs tls.ConnectionState, addr string, pins []Pin) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("the node at %s presented no certificate", addr)
	}
	got := Fingerprint(cs.PeerCertificates[0])
	if slices.ContainsFunc(pins, func(p Pin) bool { return p.Fingerprint == got }) {
		return nil
	}
	names := make([]string, 0, len(pins))
	for _, p := range pins {
		names = append(names, fmt.Sprintf("node %s pinned to %s", p.Node, p.Fingerprint))
	}
	return fmt.Errorf("TLS: %s presented a key of fingerprint %s, not the cluster database's (%s): the node's key changed without it registering (restart the node), or something else answers at its address",
		addr, got, strings.Join(names, ", "))
}

// PinnedConfig is a TLS client configuration that accepts a server
// whose certificate has one of fingerprints (a caller that holds a node's
// pin outside the database: a test, a probe).
func PinnedConfig(fingerprints ...string) *tls.Config {
	pins := make([]Pin, len(fingerprints))
	for i, f := range fingerprints {
		pins[i] = Pin{Node: "?", Fingerprint: f}
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error { return checkPin(cs, cs.ServerName, pins) }}
}

// URLCandidates are the base URLs a node registered at hostport could
// have written: with and without a trailing slash, and without :443.
func URLCandidates(hostport string) []string {
	out := []string{"https://" + hostport, "https://" + hostport + "/"}
	if host, port, err := net.SplitHostPort(hostport); err == nil && port == "443" {
		h := host
		if strings.Contains(h, ":") {
			h = "[" + h + "]"
		}
		out = append(out, "https://"+h, "https://"+h+"/")
	}
	return out
}
