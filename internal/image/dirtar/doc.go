// Package dirtar writes a local file or directory as an OCI layer tar whose
// entries sit at a destination path. The CLI uses it for a build's copy
// steps, where the sha256 of the tar is the layer's cache key, so the same
// content must always give the same bytes; the daemon uses it to turn a
// root filesystem directory into a layer.
//
// The rules, like Docker's COPY:
//
//   - A directory's contents land under dst, and dst itself becomes a
//     directory entry with the source directory's mode (except dst "/",
//     which gets no entry: the layer store makes the root). A regular
//     file lands at dst, or at dst/<basename> when dst ends in "/".
//   - dst must be absolute. It is cleaned, and entry names are written
//     without the leading "/": "app/", "app/a". Directory names end in "/".
//     Every parent of dst gets a directory entry first (mode 0755, owner
//     0:0), so extraction never has to invent one.
//   - The walk is in lexical order (filepath.WalkDir's) and never follows a
//     symlink: symlinks are stored as symlinks, and a symlink as the source
//     itself is refused. The second and later names of a hard-linked file
//     are stored as hard links (TypeLink) to the first name.
//   - Device nodes, sockets and FIFOs are skipped and reported in
//     Stats.Skipped: a sandbox gets its /dev from the runtime, and the
//     layer extractor refuses them. With Options.Overlay (the export of a
//     writable layer, which overlaytar converts) device nodes and FIFOs
//     are written as headers, for the converter to leave out and name.
//   - With Options.Normalize every entry is owned by 0:0 with no user or
//     group name, has the modification time NormalTime, and carries no
//     extended attributes; only the permission, setuid, setgid and sticky
//     bits of the mode are kept. The output is then a function of the
//     names, modes, link structure and contents alone.
//   - Without it, owners and modification times (truncated to seconds) are
//     kept, and so are the extended attributes that the layer extractor
//     applies: "security.capability" and "user.*", as PAX
//     "SCHILY.xattr.<name>" records on regular files and directories.
//
// Headers are written in the PAX format, which archive/tar narrows to
// USTAR whenever a header needs no PAX record; access and change times
// are never written.
//
// This package imports only the standard library, golang.org/x/sys/unix and
// corral/internal/errdefs; it must not import anything else from Corral.
package dirtar
