// Package oci brings OCI and Docker images into Corral's image store: it
// imports a docker-archive tarball ("docker save") or an OCI image layout (a
// directory or a tar of one) and pulls images from registries.
//
// It owns only the translation from an image's manifest and config into the
// store's terms: each layer goes to store.AddLayer under its diffID (so a
// layer already present costs nothing), the run configuration (Env,
// Entrypoint+Cmd, WorkingDir, User) becomes a store.ImageConfig, and the tag
// is written last, so a failed import never leaves a tag on a half-stored
// image. Everything it reads is bounded: layer count (store.MaxLayers),
// manifest and config sizes (maxManifest, maxConfig); the layer contents are
// bounded by the store's extractor.
//
// Errors carry errdefs kinds: ErrInvalidArgument for a malformed archive or
// image, ErrNotFound for a missing file, image or tag, ErrUnavailable for an
// unreachable registry, ErrUnauthenticated / ErrPermissionDenied for
// refused credentials.
//
// This package imports the image store, errdefs, go-containerregistry and
// the standard library; it must not import the daemon, the manager, the
// runtimes or the API.
package oci
