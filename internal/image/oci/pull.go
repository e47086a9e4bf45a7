package oci

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"corral/internal/errdefs"
	"corral/internal/image/store"
)

// PullOptions tunes Pull. The zero value pulls linux/amd64 over HTTPS.
type PullOptions struct {
	// Platform is os/arch[/variant] to pick from a multi-platform image;
	// empty means linux/amd64.
	Platform string
	// Insecure allows plain HTTP to any registry. Without it plain HTTP
	// is used only for loopback registries (localhost, 127.0.0.0/8, ::1).
	Insecure bool
}

const defaultPlatform = "linux/amd64"

// Pull fetches ref ("host[:port]/name[:tag]" or "host/name@sha256:...")
// from its registry into st and returns the stored image. A tag reference
// is tagged in st under the same name (store.ParseRef's normal form); a
// digest reference is stored untagged. Credentials come from the docker
// config (authn.DefaultKeychain).
func Pull(ctx context.Context, st *store.Store, ref string, opts PullOptions) (store.Image, error) {
	img, err := pull(ctx, st, ref, opts)
	if err != nil {
		return store.Image{}, fmt.Errorf("pulling %s: %w", truncate(ref), err)
	}
	return img, nil
}

func pull(ctx context.Context, st *store.Store, ref string, opts PullOptions) (store.Image, error) {
	if len(ref) == 0 || len(ref) > 512 {
		return store.Image{}, errdefs.Invalid("ref", "length must be 1 to 512")
	}
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	} else if r, err := name.ParseReference(ref); err == nil && isLoopback(r.Context().RegistryStr()) {
		nameOpts = append(nameOpts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return store.Image{}, errdefs.Invalid("ref", "%v", err)
	}
	tag := ""
	if _, ok := r.(name.Tag); ok {
		if tag, err = store.ParseRef(ref); err != nil {
			return store.Image{}, err
		}
	}
	plat := opts.Platform
	if plat == "" {
		plat = defaultPlatform
	}
	p, err := v1.ParsePlatform(plat)
	if err != nil {
		return store.Image{}, errdefs.Invalid("platform", "%v", err)
	}
	ropts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(*p),
		remote.WithTransport(&httpGuard{next: remote.DefaultTransport, allowHTTP: opts.Insecure}),
	}
	desc, err := remote.Get(r, ropts...)
	if err != nil {
		return store.Image{}, classify(err)
	}
	if len(desc.Manifest) > maxManifest {
		return store.Image{}, errdefs.Invalid("manifest", "%d bytes exceeds the %d byte limit", len(desc.Manifest), maxManifest)
	}
	img, err := desc.Image() // picks the platform from an index
	if err != nil {
		return store.Image{}, classify(err)
	}
	if m, err := img.RawManifest(); err != nil {
		return store.Image{}, classify(err)
	} else if len(m) > maxManifest {
		return store.Image{}, errdefs.Invalid("manifest", "%d bytes exceeds the %d byte limit", len(m), maxManifest)
	}
	return storeImage(ctx, st, img, compressedLayers, tag)
}

// isLoopback reports whether a registry host[:port] is on this machine.
func isLoopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpGuard refuses plain-HTTP requests to anything but loopback unless
// allowed. ggcr itself falls back to HTTP for private (RFC 1918) and .local
// registries; Corral does not without PullOptions.Insecure.
type httpGuard struct {
	next      http.RoundTripper
	allowHTTP bool
}

func (g *httpGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.allowHTTP && !isLoopback(req.URL.Host) {
		return nil, fmt.Errorf("%w: plain HTTP to %s refused (set insecure to allow)", errdefs.ErrPermissionDenied, req.URL.Host)
	}
	return g.next.RoundTrip(req)
}

// classify gives a registry or transport error its errdefs kind.
func classify(err error) error {
	if err == nil || hasKind(err) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", errdefs.ErrDeadlineExceeded, err)
	}
	var te *transport.Error
	if errors.As(err, &te) {
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return fmt.Errorf("%w: %w", errdefs.ErrNotFound, err)
			case transport.UnauthorizedErrorCode:
				return fmt.Errorf("%w: %w", errdefs.ErrUnauthenticated, err)
			case transport.DeniedErrorCode:
				return fmt.Errorf("%w: %w", errdefs.ErrPermissionDenied, err)
			case transport.TooManyRequestsErrorCode:
				return fmt.Errorf("%w: %w", errdefs.ErrResourceExhausted, err)
			}
		}
		switch {
		case te.StatusCode == http.StatusNotFound:
			return fmt.Errorf("%w: %w", errdefs.ErrNotFound, err)
		case te.StatusCode == http.StatusUnauthorized:
			return fmt.Errorf("%w: %w", errdefs.ErrUnauthenticated, err)
		case te.StatusCode == http.StatusForbidden:
			return fmt.Errorf("%w: %w", errdefs.ErrPermissionDenied, err)
		case te.StatusCode == http.StatusTooManyRequests:
			return fmt.Errorf("%w: %w", errdefs.ErrResourceExhausted, err)
		case te.StatusCode >= 500:
			return fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
		}
		return err
	}
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	if errors.As(err, &oe) || errors.As(err, &de) || errors.As(err, &ne) {
		return fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
	}
	return err
}

// truncate keeps hostile strings short in error messages.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
