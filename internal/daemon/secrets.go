package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"corral/internal/manager"
	"corral/internal/netpolicy/egress"
)

// secretCAKeyLabel is the seal subkey every sandbox's egress CA is derived
// from (secrets.NewCA).
const secretCAKeyLabel = "secret-egress-ca"

// headerTimeout bounds reading a request's secrets from the store.
const headerTimeout = 5 * time.Second

// secretEgress answers the egress proxy's questions about header rules
// from the manager, once it exists (the proxy starts before it).
type secretEgress struct {
	m     atomic.Pointer[manager.Manager]
	roots *x509.CertPool
}

// newSecretEgress loads the roots intercepted hosts' certificates are
// verified with: the system's, plus the PEM file caFile when set.
func newSecretEgress(caFile string) (*secretEgress, error) {
	s := &secretEgress{}
	if caFile == "" {
		return s, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("secret upstream CA: %w", err)
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("secret upstream CA %s: no PEM certificate in it", caFile)
	}
	s.roots = pool
	return s, nil
}

func (s *secretEgress) intercept(sandboxID string) *egress.Interception {
	m := s.m.Load()
	if m == nil {
		return nil
	}
	rules, ok := m.SecretEgress(sandboxID)
	if !ok {
		return nil
	}
	return &egress.Interception{
		Hosts: rules.Hosts,
		Cert:  func(host string) (*tls.Certificate, error) { return rules.CA.Leaf(host) },
		Headers: func(host string, port int, method string) ([]egress.Header, error) {
			ctx, cancel := context.WithTimeout(context.Background(), headerTimeout)
			defer cancel()
			hs, err := m.Headers(ctx, rules, host, port, method)
			if err != nil {
				return nil, err
			}
			out := make([]egress.Header, len(hs))
			for i, h := range hs {
				out[i] = egress.Header{Name: h.Name, Value: h.Value}
			}
			return out, nil
		},
	}
}

func (s *secretEgress) injected(inj egress.Injection) {
	if m := s.m.Load(); m != nil {
		m.RecordInjection(inj.SandboxID, inj.Host, inj.Headers, inj.Count, inj.Err, inj.Skipped)
	}
}
