package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a CA made on the host for a test, with one server certificate
// for localhost signed by it. Nothing of the host's is in it.
type testCA struct {
	certPEM, srvCertPEM, srvKeyPEM []byte
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{
		certPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		srvCertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		srvKeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

// tlsServerPy serves HTTPS on 127.0.0.1:PORT with CERT and KEY.
const tlsServerPy = `import http.server, ssl, sys
port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
`

// startTLSServers puts each CA's server certificate into the sandbox and
// serves HTTPS with it on its port (the key of servers), on the sandbox's
// own loopback; the servers start together.
func startTLSServers(t *testing.T, d *daemon, id string, servers map[string]testCA) {
	t.Helper()
	dir := t.TempDir()
	var launch, wait []string
	for port, ca := range servers {
		for name, b := range map[string][]byte{"srv.py": []byte(tlsServerPy), "srv.crt": ca.srvCertPEM, "srv.key": ca.srvKeyPEM} {
			local := filepath.Join(dir, port+name)
			if err := os.WriteFile(local, b, 0o600); err != nil {
				t.Fatal(err)
			}
			d.mustCLI("fs", "put", id, local, "/srv/"+port+"/"+name)
		}
		launch = append(launch, "(cd /srv/"+port+" && echo served > index.html && "+
			"setsid python3 srv.py "+port+" srv.crt srv.key >srv.log 2>&1 </dev/null &)")
		// Up when an unverified request gets through.
		wait = append(wait, "(for i in $(seq 100); do curl -ksf https://127.0.0.1:"+port+"/ >/dev/null && exit 0; sleep 0.2; done; cat /srv/"+port+"/srv.log; exit 1)")
	}
	d.mustCLI("exec", id, "--", "sh", "-c", strings.Join(launch, "; "))
	d.mustCLI("exec", id, "--", "sh", "-c", "set -e; "+strings.Join(wait, "; "))
}

// --ca-cert (per sandbox) and serve --ca-cert (the daemon's default) put
// CAs into the sandbox's trust store: curl and python verify a server
// whose certificate they signed, and a sandbox without them does not.
func TestCACerts(t *testing.T) {
	t.Parallel()
	daemonCA, ownCA := newTestCA(t, "corral daemon test CA"), newTestCA(t, "corral sandbox test CA")
	dir := t.TempDir()
	daemonFile, ownFile, junk := filepath.Join(dir, "daemon.pem"), filepath.Join(dir, "own.pem"), filepath.Join(dir, "junk.pem")
	for f, b := range map[string][]byte{daemonFile: daemonCA.certPEM, ownFile: ownCA.certPEM, junk: []byte("not a certificate\n")} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, "--ca-cert", daemonFile)

	// Garbage is a 400 naming the entry, from the CLI and the API.
	if out, errs, code := d.cli("", "create", "--ca-cert", junk); code == 0 || !strings.Contains(errs, "ca_certs[0]") {
		t.Errorf("create --ca-cert junk: exit %d, %q %q", code, out, errs)
	}
	if code, body := d.api("POST", "/v1/sandboxes", d.token, `{"ca_certs":["-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"]}`); code != 400 || !strings.Contains(body, "ca_certs[0]") {
		t.Errorf("a private key as a CA: %d %s", code, body)
	}

	curl := func(id, port string) (string, int) {
		out, errs, code := d.cli("", "exec", id, "--", "curl", "-sS", "https://localhost:"+port+"/")
		return out + errs, code
	}
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			with := d.create("--runtime", rt, "--ca-cert", ownFile)
			without := d.create("--runtime", rt)
			for _, id := range []string{with, without} {
				startTLSServers(t, d, id, map[string]testCA{"8443": daemonCA, "8444": ownCA})
			}
			for _, id := range []string{with, without} {
				if out, code := curl(id, "8443"); code != 0 || out != "served\n" {
					t.Errorf("%s: curl behind the daemon's CA: exit %d, %q", id, code, out)
				}
			}
			if out, code := curl(with, "8444"); code != 0 || out != "served\n" {
				t.Errorf("curl behind the sandbox's CA: exit %d, %q", code, out)
			}
			if out, code := curl(without, "8444"); code == 0 || !strings.Contains(out, "certificate") {
				t.Errorf("curl without the sandbox's CA should fail verification: exit %d, %q", code, out)
			}
			py := `import urllib.request; print(urllib.request.urlopen("https://localhost:8444/").read().decode(), end="")`
			if out, errs, code := d.cli("", "exec", with, "--", "python3", "-c", py); code != 0 || out != "served\n" {
				t.Errorf("python behind the sandbox's CA: exit %d, %q %q", code, out, errs)
			}
			if out := d.mustCLI("exec", with, "--", "sh", "-c", `grep -c BEGIN "$NODE_EXTRA_CA_CERTS"`); out != "2\n" {
				t.Errorf("NODE_EXTRA_CA_CERTS holds %q certificates, want 2", out)
			}
		})
	}
}

// A sandbox from the warm pool has the daemon's CAs from its pooled start
// and gets the caller's at the claim; an image build's sandboxes have the
// daemon's too.
func TestCACertsWarmPool(t *testing.T) {
	t.Parallel()
	daemonCA, ownCA := newTestCA(t, "corral daemon test CA"), newTestCA(t, "corral sandbox test CA")
	dir := t.TempDir()
	daemonFile, ownFile := filepath.Join(dir, "daemon.pem"), filepath.Join(dir, "own.pem")
	for f, b := range map[string][]byte{daemonFile: daemonCA.certPEM, ownFile: ownCA.certPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, "--ca-cert", daemonFile, "--warm-pool", "1")
	waitFor(t, time.Minute, "the warm pool ready", func() bool {
		_, body := d.api("GET", "/v1/version", d.token, "")
		return strings.Contains(body, `"ready":1`)
	})
	id := d.create("--ca-cert", ownFile)
	if _, body := d.api("GET", "/v1/version", d.token, ""); !strings.Contains(body, `"hits":1`) {
		t.Fatalf("the create did not take the pooled sandbox: %s", body)
	}
	startTLSServers(t, d, id, map[string]testCA{"8443": daemonCA, "8444": ownCA})
	for _, port := range []string{"8443", "8444"} {
		if out, errs, code := d.cli("", "exec", id, "--", "curl", "-sS", "https://localhost:"+port+"/"); code != 0 || out != "served\n" {
			t.Errorf("curl on %s from a claimed sandbox: exit %d, %q %q", port, code, out, errs)
		}
	}

	// An image build's sandboxes trust the daemon's CAs too.
	d.mustBuild(t.TempDir(), "base: debian:bookworm\nsteps:\n  - run: cp /etc/ssl/certs/ca-certificates.crt /bundle-at-build.pem\n", "-t", "test/ca-build:1")
	bundle := d.mustCLI("run", "--image", "test/ca-build:1", "--", "cat", "/bundle-at-build.pem")
	if !strings.Contains(bundle, strings.TrimSpace(string(daemonCA.certPEM))) {
		t.Errorf("the build sandbox's bundle lacks the daemon's CA")
	}
}
