package nodetls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The node's own key and self-signed certificate, in its state directory.
const (
	KeyFile  = "cluster-tls.key"
	CertFile = "cluster-tls.crt"
)

// selfSignedLife is how long a made certificate is valid. Callers check
// the pin, not the dates (a pinned key is trusted until it is replaced),
// but other TLS clients look at them.
const selfSignedLife = 20 * 365 * 24 * time.Hour

// Load is a node's certificate and its fingerprint: the operator's
// (certFile and keyFile, both or neither), or else the key and
// self-signed certificate in stateDir, made on the first start for hosts
// (the names and addresses it is reached at) and kept (0600). Deleting
// the two files and restarting rotates the key; the node registers the
// new fingerprint as it joins.
func Load(stateDir, certFile, keyFile string, hosts []string) (tls.Certificate, string, error) {
	switch {
	case (certFile == "") != (keyFile == ""):
		return tls.Certificate{}, "", fmt.Errorf("--node-tls-cert and --node-tls-key: give both or neither")
	case certFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, "", fmt.Errorf("--node-tls-cert %s and --node-tls-key %s: %w", certFile, keyFile, err)
		}
		return withFingerprint(cert)
	}
	kp, cp := filepath.Join(stateDir, KeyFile), filepath.Join(stateDir, CertFile)
	cert, err := tls.LoadX509KeyPair(cp, kp)
	if err == nil {
		return withFingerprint(cert)
	}
	_, kerr := os.Stat(kp)
	_, cerr := os.Stat(cp)
	if !errors.Is(kerr, os.ErrNotExist) || !errors.Is(cerr, os.ErrNotExist) {
		return tls.Certificate{}, "", fmt.Errorf("the node's TLS key %s and certificate %s: %w (delete both to make new ones)", kp, cp, err)
	}
	if err := makeSelfSigned(kp, cp, hosts); err != nil {
		return tls.Certificate{}, "", err
	}
	if cert, err = tls.LoadX509KeyPair(cp, kp); err != nil {
		return tls.Certificate{}, "", err
	}
	return withFingerprint(cert)
}

func withFingerprint(cert tls.Certificate) (tls.Certificate, string, error) {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return tls.Certificate{}, "", err
	}
	cert.Leaf = leaf
	return cert, Fingerprint(leaf), nil
}

// makeSelfSigned writes a new P-256 key to keyPath and a certificate for
// it, signed by itself and naming hosts, to certPath; both 0600, the key
// first, each written whole before it is renamed into place.
func makeSelfSigned(keyPath, certPath string, hosts []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "corral node"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(selfSignedLife),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})); err != nil {
		return err
	}
	return writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing the node's TLS key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the node's TLS key: %w", err)
	}
	return nil
}
