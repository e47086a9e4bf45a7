package manager

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"strings"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// Where a sandbox's extra CA certificates go, for the TLS clients users
// meet: the distribution's bundle (OpenSSL, so curl, python's ssl, pip,
// git, apt), one file per CA in update-ca-certificates' own directory (so
// a later run of it keeps them), and one file of them all for Node
// (NODE_EXTRA_CA_CERTS; Node trusts its compiled-in list, not the
// system's).
const (
	caLocalDir = "/usr/local/share/ca-certificates"
	caAllFile  = "/usr/local/share/corral/ca-certificates.pem"
	caNodeEnv  = "NODE_EXTRA_CA_CERTS"
)

// caBundles are the system bundles of the common distributions (Debian
// and Ubuntu, Fedora and RHEL, Alpine). Each that exists gets the CAs; if
// none does, the Debian one is created.
var caBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
}

// maxBundleBytes bounds a bundle the daemon reads back from a sandbox (a
// hostile image could make it anything); Debian's is about 200 KiB.
const maxBundleBytes = 8 << 20

// sandboxCAs are the CA certificates a sandbox of spec trusts beyond its
// image's: the daemon's default, then its own.
func (m *Manager) sandboxCAs(spec sandbox.Spec) []string {
	return append(append([]string(nil), m.cfg.CACerts...), spec.CACerts...)
}

// caEnv points Node at the extra CAs when a sandbox has any, unless the
// caller set the variable itself.
func (m *Manager) caEnv(spec *sandbox.Spec) {
	if len(m.sandboxCAs(*spec)) == 0 && len(spec.SecretHeaders) == 0 {
		return
	}
	if _, ok := spec.Env[caNodeEnv]; ok {
		return
	}
	env := make(map[string]string, len(spec.Env)+1)
	for k, v := range spec.Env {
		env[k] = v
	}
	env[caNodeEnv] = caAllFile
	spec.Env = env
}

// installCAs adds pems (validated PEM certificates) to the sandbox's trust
// store through its agent. It is idempotent: a certificate already in a
// file is not added again (a copy of a snapshot, a claimed pooled sandbox
// that has the daemon's).
func installCAs(ctx context.Context, client *agentapi.Client, pems []string) error {
	if len(pems) == 0 {
		return nil
	}
	var certs [][]byte
	for _, p := range pems {
		certs = append(certs, splitPEM(p)...)
	}
	for _, c := range certs {
		sum := sha256.Sum256(c)
		name := caLocalDir + "/corral-" + hex.EncodeToString(sum[:8]) + ".crt"
		if _, err := client.WriteFile(ctx, name, bytes.NewReader(c), 0o644, ""); err != nil {
			return fmt.Errorf("adding CA certificates: %w", err)
		}
	}
	if err := appendMissing(ctx, client, caAllFile, certs, true); err != nil {
		return err
	}
	found := false
	for _, b := range caBundles {
		if err := appendMissing(ctx, client, b, certs, false); err == nil {
			found = true
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
	}
	if !found {
		return appendMissing(ctx, client, caBundles[0], certs, true)
	}
	return nil
}

// appendMissing adds to the file at path the certificates it does not
// hold yet; a missing file is errdefs.ErrNotFound unless create.
func appendMissing(ctx context.Context, client *agentapi.Client, path string, certs [][]byte, create bool) error {
	old, err := readSmall(ctx, client, path)
	switch {
	case errors.Is(err, errdefs.ErrNotFound) && create:
		old = nil
	case err != nil:
		return err
	}
	out := append([]byte(nil), old...)
	added := false
	for _, c := range certs {
		if bytes.Contains(out, c) {
			continue
		}
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, c...)
		added = true
	}
	if !added && old != nil {
		return nil
	}
	if _, err := client.WriteFile(ctx, path, bytes.NewReader(out), 0o644, ""); err != nil {
		return fmt.Errorf("adding CA certificates to %s: %w", path, err)
	}
	return nil
}

// readSmall reads a file of at most maxBundleBytes from the sandbox.
func readSmall(ctx context.Context, client *agentapi.Client, path string) ([]byte, error) {
	rc, _, err := client.ReadFile(ctx, path, "")
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxBundleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxBundleBytes {
		return nil, fmt.Errorf("%w: %s in the sandbox is over %d bytes", errdefs.ErrFailedPrecondition, path, maxBundleBytes)
	}
	return b, nil
}

// splitPEM returns each certificate of a validated PEM text re-encoded
// on its own (canonical text, so the same CA given twice is found).
func splitPEM(p string) [][]byte {
	var out [][]byte
	rest := []byte(strings.TrimSpace(p))
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return out
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes}))
	}
}
