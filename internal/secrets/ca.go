package secrets

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// A sandbox with header rules trusts a certificate authority of its own,
// with which the egress proxy signs a certificate for each named host it
// terminates TLS for. The CA's key is derived from a subkey of the
// daemon's key and the sandbox's id (so a restarted daemon signs with the
// same key the sandbox already trusts, and nothing about the key is ever
// stored or leaves the daemon); the CA is ECDSA P-256, constrained to
// signing server certificates, and valid for CALifetime from the
// sandbox's creation.

// CALifetime is how long a sandbox's CA is valid after the sandbox's
// creation (a sandbox lives at most a day unless extended).
const CALifetime = 7 * 24 * time.Hour

// leafLifetime is how long a host's certificate is valid (and cached).
const leafLifetime = 24 * time.Hour

// CA is one sandbox's certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA derives the CA of sandbox id, created at created, from seed (a
// subkey of the daemon's key for this purpose alone).
func NewCA(seed []byte, id string, created time.Time) (*CA, error) {
	key, err := deriveKey(seed, id)
	if err != nil {
		return nil, err
	}
	serial := derive(seed, "serial/"+id)
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetBytes(serial[:16]),
		Subject:               pkix.Name{CommonName: "Corral sandbox " + id + " egress CA", Organization: []string{"Corral"}},
		NotBefore:             created.Add(-time.Hour).UTC().Truncate(time.Second),
		NotAfter:              created.Add(CALifetime).UTC().Truncate(time.Second),
		KeyUsage:              x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("making the sandbox's CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return &CA{cert: cert, key: key, pem: p, leaves: map[string]*tls.Certificate{}}, nil
}

// PEM is the CA's certificate, for the sandbox's trust store.
func (c *CA) PEM() string { return c.pem }

// Leaf returns a certificate for host signed by the CA, cached until near
// its end.
func (c *CA) Leaf(host string) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if l, ok := c.leaves[host]; ok && now.Before(l.Leaf.NotAfter.Add(-time.Hour)) {
		return l, nil
	}
	if !now.Before(c.cert.NotAfter) {
		return nil, errors.New("the sandbox's egress CA has expired")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var serial [16]byte
	rand.Read(serial[:])
	tmpl := &x509.Certificate{
		SerialNumber: new(big.Int).SetBytes(serial[:]),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     earlier(now.Add(leafLifetime), c.cert.NotAfter),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	l := &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: key, Leaf: leaf}
	c.leaves[host] = l
	return l, nil
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// derive is HMAC-SHA-256 of label under seed.
func derive(seed []byte, label string) []byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte("corral egress ca\x00"))
	m.Write([]byte(label))
	return m.Sum(nil)
}

// deriveKey makes the CA's P-256 key from seed and id: the first candidate
// scalar that is a valid key (almost always the first).
func deriveKey(seed []byte, id string) (*ecdsa.PrivateKey, error) {
	for i := uint32(0); i < 64; i++ {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], i)
		d := derive(seed, "key/"+id+"/"+string(n[:]))
		if k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d); err == nil {
			return k, nil
		}
	}
	return nil, errors.New("deriving the sandbox's CA key: no valid scalar")
}
