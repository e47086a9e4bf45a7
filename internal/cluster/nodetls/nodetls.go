// Package nodetls is TLS on the links to a node: a node's listener serves
// TLS with a key of its own (made once in its state directory, or the
// operator's certificate), and whoever calls a node (a control plane, or
// another node fetching an image or a snapshot) checks the certificate
// against the fingerprint the node registered in the cluster database
// (its pin), or against the operator's CA with the node's host as the
// name when one is given.
//
// It imports nothing from Corral.
package nodetls

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// Fingerprint is the pin of a certificate: "sha256:" and the hex SHA-256
// of its public key (SubjectPublicKeyInfo), so a certificate re-issued
// for the same key keeps it.
func Fingerprint(c *x509.Certificate) string {
	h := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(h[:])
}

// ValidFingerprint says whether s is a fingerprint as Fingerprint writes
// it.
func ValidFingerprint(s string) bool {
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hexPart) != 64 || strings.ToLower(hexPart) != hexPart {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil
}

// ServerConfig is a node listener's TLS: cert, TLS 1.2 at least, HTTP/1.1
// (tunnels and full-duplex streams are proxied as HTTP/1.1 upgrades and
// bodies).
func ServerConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}

// LoadCA reads a PEM bundle of CA certificates (--cluster-ca).
func LoadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--cluster-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--cluster-ca %s: no PEM certificate in it", path)
	}
	return pool, nil
}
