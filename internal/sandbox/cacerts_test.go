package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
)

func testCertPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestValidateCACerts(t *testing.T) {
	cert := testCertPEM(t)
	many := make([]string, MaxCACerts+1)
	for i := range many {
		many[i] = cert
	}
	for _, tt := range []struct {
		name string
		pems []string
		want string // "" for valid
	}{
		{"one", []string{cert}, ""},
		{"a chain", []string{cert + "\n" + cert}, ""},
		{"none", nil, ""},
		{"garbage", []string{"hello"}, "ca_certs[0]: no PEM certificate"},
		{"a key", []string{cert, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}, `ca_certs[1]: PEM block 1 is "PRIVATE KEY"`},
		{"bad DER", []string{"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}, "not an X.509 certificate"},
		{"trailing text", []string{cert + "junk"}, "text after certificate 1"},
		{"too large", []string{cert + strings.Repeat(" ", MaxCACertBytes)}, "at most"},
		{"too many", many, "at most 16 entries"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateCACerts("ca_certs", tt.pems)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, errdefs.ErrInvalidArgument)):
				t.Errorf("error %v, want invalid_argument with %q", err, tt.want)
			}
		})
	}
}
