package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// The secrets test's world: a namespace holding two "internet" addresses,
// each serving HTTPS (a certificate from a CA of the test's own) and
// HTTP, with a fake upstream resolver naming them. The server tells the
// sandbox only whether the Authorization header it got matches the
// expected value, never the value.
const (
	secretAPIAddr   = "198.51.100.33" // api.secret.test
	secretOtherAddr = "198.51.100.34" // other.secret.test
	secretHostSide  = "198.51.100.250"
)

type secretWorld struct {
	dnsAddr string
	caFile  string // the servers' CA (PEM), for --secret-upstream-ca
	caPEM   string

	mu   sync.Mutex
	want string   // the Authorization the server expects
	seen []string // "host auth" of every request
}

func newSecretWorld(t *testing.T) *secretWorld {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	ns := "cws" + hex.EncodeToString(b)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "link", "add", ns, "type", "veth", "peer", "name", "w0", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", ns).Run() })
	run(t, "ip", "addr", "add", secretHostSide+"/32", "dev", ns)
	run(t, "ip", "link", "set", ns, "up")
	for _, a := range []string{secretAPIAddr, secretOtherAddr} {
		run(t, "ip", "-n", ns, "addr", "add", a+"/24", "dev", "w0")
		run(t, "ip", "route", "add", a+"/32", "dev", ns, "src", secretHostSide)
	}
	run(t, "ip", "-n", ns, "link", "set", "w0", "up")
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	run(t, "ip", "-n", ns, "route", "add", secretHostSide+"/32", "dev", "w0")

	w := &secretWorld{}
	caCert, caKey := secretTestCA(t)
	w.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}))
	w.caFile = filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(w.caFile, []byte(w.caPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	leaf := secretTestLeaf(t, caCert, caKey, "api.secret.test", "other.secret.test")
	// Handshakes a client refuses (the not-named host's certificate,
	// which the sandbox does not trust) are expected: not logged.
	srv := &http.Server{Handler: http.HandlerFunc(w.serve), TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}},
		ErrorLog: log.New(io.Discard, "", 0)}
	tl := listenInNS(t, ns, "0.0.0.0:443")
	pl := listenInNS(t, ns, "0.0.0.0:80")
	go srv.ServeTLS(tl, "", "")
	go srv.Serve(pl)
	t.Cleanup(func() { srv.Close() })
	w.dnsAddr = secretDNS(t)
	return w
}

// serve answers "HOST header=match|mismatch|missing".
func (w *secretWorld) serve(rw http.ResponseWriter, r *http.Request) {
	got := r.Header.Get("Authorization")
	w.mu.Lock()
	w.seen = append(w.seen, r.Host+" "+got)
	verdict := "mismatch"
	switch {
	case got == "":
		verdict = "missing"
	case got == w.want:
		verdict = "match"
	}
	w.mu.Unlock()
	rw.Write([]byte(r.Host + " header=" + verdict + "\n"))
}

func (w *secretWorld) expect(auth string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want = auth
}

// listenInNS listens on addr inside network namespace ns: the socket is
// made from a thread moved into ns and stays there.
func listenInNS(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		target, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		l, err := net.Listen("tcp4", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listening in %s: %v", ns, r.err)
	}
	t.Cleanup(func() { r.l.Close() })
	return r.l
}

// secretDNS serves the world's two names on loopback.
func secretDNS(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"api.secret.test.": secretAPIAddr, "other.secret.test.": secretOtherAddr}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(rw dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.ToLower(q.Question[0].Name)
		if ip, ok := names[name]; ok && q.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
		} else if !ok {
			m.Rcode = dns.RcodeNameError
		}
		_ = rw.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

func secretTestCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "corral e2e upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func secretTestLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names ...string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
