package sandbox

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"corral/internal/errdefs"
)

// Bounds on the CA certificates a sandbox trusts beyond its image's
// (Spec.CACerts, and the daemon's default): each entry is one PEM file.
const (
	MaxCACerts     = 16
	MaxCACertBytes = 32 << 10
)

// ValidateCACerts checks CA certificates given as PEM text: at most
// MaxCACerts entries of at most MaxCACertBytes, each one or more
// CERTIFICATE blocks that parse as X.509 and nothing else but whitespace.
// The error names field and the entry's index.
func ValidateCACerts(field string, pems []string) error {
	if len(pems) > MaxCACerts {
		return errdefs.Invalid(field, "at most %d entries, got %d", MaxCACerts, len(pems))
	}
	for i, p := range pems {
		if err := checkPEM(p); err != nil {
			return errdefs.Invalid(fmt.Sprintf("%s[%d]", field, i), "%v", err)
		}
	}
	return nil
}

func checkPEM(p string) error {
	if len(p) > MaxCACertBytes {
		return fmt.Errorf("%d bytes; at most %d", len(p), MaxCACertBytes)
	}
	rest := []byte(p)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("PEM block %d is %q, want CERTIFICATE", n+1, b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("PEM block %d is not an X.509 certificate: %v", n+1, err)
		}
		n++
	}
	switch {
	case n == 0:
		return fmt.Errorf("no PEM certificate (want -----BEGIN CERTIFICATE-----)")
	case len(bytes.TrimSpace(rest)) > 0:
		return fmt.Errorf("text after certificate %d is not a PEM certificate", n)
	}
	return nil
}
