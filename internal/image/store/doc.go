// Package store owns Corral's local image store: content-addressed
// filesystem layers, the image records that stack them, the tags that name
// images, the leases that sandboxes hold on images, and the shared read-only
// overlayfs mounts that serve as a sandbox's root filesystem.
//
// # Vocabulary
//
// A layer is an extracted tar stream, addressed by the sha256 of its
// uncompressed tar (the OCI diffID). An image is an ordered list of layers
// (bottom first) plus a small run configuration, addressed by the sha256 of
// the canonical JSON of both. A tag ("name:tag") points at one image. A lease
// ties a sandbox ID to an image for the sandbox's whole life; a leased image,
// its layers and its mount are never garbage collected.
//
// # On-disk layout
//
//	<root>/layers/sha256/<hex>/fs/        the extracted layer (overlayfs whiteouts)
//	<root>/layers/sha256/<hex>/layer.json the layer record
//	<root>/images/sha256/<hex>.json       an image record
//	<root>/tags.json                      name:tag -> image digest
//	<root>/leases/<sandbox-id>            the leased image digest
//	<root>/mounts/<image hex>/            the image's shared read-only overlay
//	<root>/mountpoints/                   a store-made top layer holding the
//	                                      runtime's mount points (/.corral)
//	<root>/buildcache/<key hex>.json     a build step's cached result
//	<root>/tmp/                           work in progress; emptied by Open
//
// Every file is written to a temporary name, synced and renamed into place; a
// layer is extracted under tmp/ and its directory renamed into layers/ only
// once complete, so a directory in layers/ is always a whole layer. Records
// are validated when read back: a corrupt one is an error naming the file.
//
// One Store per root per process: the daemon's state-directory lock keeps a
// second process away.
//
// This package imports nothing from the daemon, the manager, the runtimes or
// the API; they import it.
package store
