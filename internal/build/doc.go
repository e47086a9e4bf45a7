// Package build builds images from a spec: a base, then steps, each of
// which becomes a content-addressed layer cached under a key that covers
// everything its result depends on.
//
// # Steps
//
// A step that changes files (apt_install, pip_install, npm_install, run,
// workdir) runs in a build sandbox: a real sandbox of the default runtime,
// created by the manager from the image as built so far, with the
// daemon's network policy (egress allowed, internal ranges denied). When
// the step's command succeeds, the runtime exports what the sandbox
// changed as an OCI layer (runtime.ChangeExporter) and the store adds it;
// when it fails, nothing is exported, so no partial layer exists. The
// sandbox is terminated either way. A copy step needs no sandbox: the
// client uploaded the layer (its digest is the content hash). env and user
// steps only change the configuration later steps run with.
//
// # Cache
//
// key(base) covers the base's identity (the Debian recipe, or the image
// digest); key(step i) = sha256(key(step i-1), the step's canonical JSON).
// The canonical JSON of a copy step holds the uploaded layer's digest and
// the destination, not the client's path, so the key changes exactly when
// the copied content does. A hit replaces the step with the cached result
// (the layers and configuration after it). Each key has a lock, so
// concurrent builds of one spec run each step once and the others hit the
// cache.
//
// The package uses the manager for sandboxes and the image store for
// layers and cache entries; the API layer calls it and turns its events and
// errors into the wire format.
package build
