package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/cluster/nodetls"
	"corral/sdk/go/corral"
)

// base is the daemon's API URL: https for a cluster node, whose
// listener serves TLS only.
func (d *daemon) base() string {
	if d.tls {
		return "https://" + d.addr
	}
	return "http://" + d.addr
}

// httpClient calls the daemon: a cluster node's pinned to the key in
// its state directory (read at each handshake, so a node restarted with
// a new key is checked against the new one).
func (d *daemon) httpClient() *http.Client {
	if !d.tls {
		return http.DefaultClient
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"},
		VerifyConnection: func(cs tls.ConnectionState) error {
			want, err := d.tlsFingerprint()
			if err != nil {
				return err
			}
			if got := nodetls.Fingerprint(cs.PeerCertificates[0]); got != want {
				return fmt.Errorf("node at %s presented %s, its state directory holds %s", d.addr, got, want)
			}
			return nil
		}}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: false}}
}

// tlsFingerprint is the fingerprint of the certificate the node made in
// its state directory.
func (d *daemon) tlsFingerprint() (string, error) {
	b, err := os.ReadFile(filepath.Join(d.state, nodetls.CertFile))
	if err != nil {
		return "", err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", fmt.Errorf("%s: no PEM certificate", nodetls.CertFile)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", err
	}
	return nodetls.Fingerprint(c), nil
}

// checkNodePlainHTTPRefused: a node's listener answers plain HTTP with
// TLS's refusal (400), never the API, whatever the token; over TLS, the
// key it presents is the one it registered (the control planes reached
// it through that pin).
func checkNodePlainHTTPRefused(t *testing.T, n *daemon) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+n.addr+"/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+n.token)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "sandboxes") {
			t.Fatalf("a node's listener answered plain HTTP: %d %s", resp.StatusCode, b)
		}
	}
	if resp, err := n.httpClient().Get(n.base() + "/v1/health"); err != nil {
		t.Fatalf("the node over TLS, pinned to its state directory's key: %v", err)
	} else {
		resp.Body.Close()
	}
}

// isStatus says whether err is the API's error answer of status.
func isStatus(err error, status int) bool {
	var ce *corral.Error
	return errors.As(err, &ce) && ce.Status == status
}

// rotateNodeKey deletes stopped node n's TLS key and certificate, so its
// next start makes a new key and registers its fingerprint; it returns
// the old fingerprint.
func rotateNodeKey(t *testing.T, n *daemon) string {
	t.Helper()
	old, err := n.tlsFingerprint()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{nodetls.KeyFile, nodetls.CertFile} {
		if err := os.Remove(filepath.Join(n.state, f)); err != nil {
			t.Fatal(err)
		}
	}
	return old
}

// checkRotatedKey: node n (named name), restarted with a new key,
// registered its fingerprint (shown by c's node list) and is reached
// through control c with it: c's merged list has no node missing and
// holds each of ids, sandboxes of n.
func checkRotatedKey(ctx context.Context, t *testing.T, c *controlPlane, token, name string, n *daemon, old string, ids []string) {
	t.Helper()
	now, err := n.tlsFingerprint()
	if err != nil || now == old {
		t.Fatalf("the node's key after its files were deleted: %s (%v), before %s", now, err, old)
	}
	if got := c.nodes()[name].TLSFingerprint; got != now {
		t.Fatalf("the node's registered fingerprint %q, its key's %s", got, now)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+c.addr+"/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if missing := resp.Header.Get("X-Corral-Missing-Nodes"); resp.StatusCode != http.StatusOK || missing != "" {
		t.Fatalf("the list after the node's new key: %d, missing %q: %s", resp.StatusCode, missing, b)
	}
	for _, id := range ids {
		if !strings.Contains(string(b), id) {
			t.Fatalf("the list after the node's new key lacks its sandbox %s: %s", id, b)
		}
	}
}
