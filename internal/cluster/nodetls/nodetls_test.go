package nodetls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// serve serves TLS with cert on loopback and counts the requests its
// handler saw.
func serve(t *testing.T, cert tls.Certificate) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}), TLSConfig: ServerConfig(cert)}
	go srv.Serve(tls.NewListener(ln, srv.TLSConfig))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), &hits
}

func get(tr http.RoundTripper, u string) (string, error) {
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func pinsOf(node, fp string) func(context.Context, string) ([]Pin, error) {
	return func(context.Context, string) ([]Pin, error) { return []Pin{{Node: node, Fingerprint: fp}}, nil }
}

func TestLoadMakesAndKeepsKey(t *testing.T) {
	dir := t.TempDir()
	_, fp, err := Load(dir, "", "", []string{"127.0.0.1", "node1.example"})
	if err != nil {
		t.Fatal(err)
	}
	if !ValidFingerprint(fp) {
		t.Fatalf("fingerprint %q", fp)
	}
	for _, f := range []string{KeyFile, CertFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, st, err)
		}
	}
	cert, again, err := Load(dir, "", "", nil)
	if err != nil || again != fp {
		t.Fatalf("a restart changed the key: %s then %s (%v)", fp, again, err)
	}
	if len(cert.Leaf.IPAddresses) != 1 || len(cert.Leaf.DNSNames) != 1 || cert.Leaf.DNSNames[0] != "node1.example" {
		t.Fatalf("names: %v %v", cert.Leaf.IPAddresses, cert.Leaf.DNSNames)
	}
	// Rotation: delete both, start again.
	os.Remove(filepath.Join(dir, KeyFile))
	os.Remove(filepath.Join(dir, CertFile))
	if _, rotated, err := Load(dir, "", "", nil); err != nil || rotated == fp {
		t.Fatalf("rotation kept %s (%v)", rotated, err)
	}
	// One file without the other is refused, not silently replaced.
	os.Remove(filepath.Join(dir, CertFile))
	if _, _, err := Load(dir, "", "", nil); err == nil {
		t.Fatal("a key without its certificate was accepted")
	}
	if _, _, err := Load(dir, "x.crt", "", nil); err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("a certificate without a key: %v", err)
	}
}

func TestPinnedFingerprint(t *testing.T) {
	cert, fp, err := Load(t.TempDir(), "", "", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := Load(t.TempDir(), "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, hits := serve(t, cert)
	if body, err := get((&Dialer{Pins: pinsOf("n1", fp)}).Transport(), "https://"+addr+"/"); err != nil || body != "ok" {
		t.Fatalf("the pinned key was refused: %q %v", body, err)
	}
	_, err = get((&Dialer{Pins: pinsOf("n1", other)}).Transport(), "https://"+addr+"/")
	if err == nil || !strings.Contains(err.Error(), "node n1 pinned to "+other) || !strings.Contains(err.Error(), fp) {
		t.Fatalf("another key's pin: %v", err)
	}
	none := func(context.Context, string) ([]Pin, error) { return nil, nil }
	if _, err := get((&Dialer{Pins: none}).Transport(), "https://"+addr+"/"); err == nil || !strings.Contains(err.Error(), "no node is registered") {
		t.Fatalf("no pin: %v", err)
	}
	if _, err := get((&Dialer{Pins: pinsOf("n1", fp)}).Transport(), "http://"+addr+"/"); !errors.Is(err, ErrPlain) {
		t.Fatalf("a plain-HTTP address: %v", err)
	}
	if _, err := get(&http.Transport{TLSClientConfig: PinnedConfig(fp)}, "https://"+addr+"/"); err != nil {
		t.Fatalf("PinnedConfig: %v", err)
	}
	if _, err := get(&http.Transport{TLSClientConfig: PinnedConfig(other)}, "https://"+addr+"/"); err == nil {
		t.Fatal("PinnedConfig accepted another key")
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2 (the accepted calls only)", n)
	}
}

func TestPlainHTTPRefused(t *testing.T) {
	cert, _, err := Load(t.TempDir(), "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, hits := serve(t, cert)
	resp, err := http.Get("http://" + addr + "/")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP answered %d", resp.StatusCode)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("a plain-HTTP request reached the handler")
	}
}

// testCA makes a CA and a certificate it signs for ip, as an operator's
// PKI would.
func testCA(t *testing.T, dir string, ip string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), IPAddresses: []net.IP{net.ParseIP(ip)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	return
}

func TestOperatorCA(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := testCA(t, dir, "127.0.0.1")
	cert, fp, err := Load(t.TempDir(), certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fp != Fingerprint(cert.Leaf) {
		t.Fatal("the operator certificate's fingerprint")
	}
	roots, err := LoadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serve(t, cert)
	if _, err := get((&Dialer{Roots: roots}).Transport(), "https://"+addr+"/"); err != nil {
		t.Fatalf("by CA: %v", err)
	}
	// The certificate names 127.0.0.1, not localhost.
	_, port, _ := net.SplitHostPort(addr)
	if _, err := get((&Dialer{Roots: roots}).Transport(), "https://localhost:"+port+"/"); err == nil {
		t.Fatal("a host the certificate does not name was accepted")
	}
	// A self-signed node is not under the CA.
	self, _, _ := Load(t.TempDir(), "", "", []string{"127.0.0.1"})
	saddr, _ := serve(t, self)
	if _, err := get((&Dialer{Roots: roots}).Transport(), "https://"+saddr+"/"); err == nil {
		t.Fatal("a certificate outside the CA was accepted")
	}
	if _, err := LoadCA(certFile + ".none"); err == nil {
		t.Fatal("a missing CA file")
	}
}

func TestURLCandidates(t *testing.T) {
	got := strings.Join(URLCandidates("h:443"), " ")
	if got != "https://h:443 https://h:443/ https://h https://h/" {
		t.Fatal(got)
	}
	if !ValidFingerprint(Fingerprint(&x509.Certificate{})) || ValidFingerprint("sha256:XY") || ValidFingerprint("") {
		t.Fatal("ValidFingerprint")
	}
}
