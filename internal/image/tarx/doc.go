// Package tarx extracts one OCI/Docker image layer (a tar stream, plain or
// gzip-compressed) into an empty directory of the layer store, turning OCI
// whiteouts into overlayfs whiteouts so that the extracted layers can be
// stacked as overlayfs lower directories.
//
// Layers come from registries and from user-supplied files, so every
// archive is treated as hostile. The package owns the rules that keep an
// archive inside its destination directory:
//
//   - Nothing is ever written through a symlink. Every file, directory and
//     link is created with an *at system call relative to a descriptor of
//     its parent directory. That descriptor is opened with openat2(2) and
//     RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it, and
//     otherwise by a walk from the destination, one component at a time,
//     with O_NOFOLLOW|O_DIRECTORY. An entry whose parent path meets a
//     symlink (a "symlink to /etc, then etc/passwd" archive) is refused.
//     A later entry with the same name as an earlier symlink replaces the
//     symlink; it is never opened through it.
//   - Paths are cleaned. A leading "/" is dropped, so "/etc/x" lands in
//     dst/etc/x, as docker and containerd do: layers built by common tools
//     contain absolute names, and refusing them would refuse real images.
//     A name whose ".." components climb above the root after cleaning is
//     refused, as are names with NUL bytes and names longer than
//     Limits.MaxPathLen.
//   - Regular files, directories, symlinks and hard links are extracted.
//     Symlink targets are not checked: they are only ever resolved inside a
//     sandbox's root. A hard link must name an earlier regular file (or hard
//     link to one) of the same layer; links to anything else (a symlink,
//     a directory, a path outside, a file of a lower layer) are refused.
//     Character and block devices, FIFOs, sockets and unknown entry types
//     are refused: a sandbox gets its /dev from the runtime, and a device
//     node in a layer would be a door to host devices.
//   - Modes keep their setuid, setgid and sticky bits (mode & 0o7777):
//     images need them (passwd, sudo, /tmp). They only take effect inside a
//     sandbox's user namespace; the layer store must stay unreadable to
//     unprivileged host users (mode 0700 on its root) so that nobody on the
//     host can run an image's setuid-root binary from the store.
//   - Owners (the tar uid and gid) are applied only when running as root,
//     with lchown semantics. Modification times are applied without
//     following symlinks; directories get theirs (and their mode) after the
//     last entry, deepest first, because creating children changes them.
//   - Extended attributes come only from PAX "SCHILY.xattr." records, and
//     only in the "user." namespace and "security.capability" (the latter
//     only as root), on regular files and directories. Every other
//     namespace is ignored: "trusted.overlay.*" in particular must never be
//     forged by an archive. An attribute the kernel would refuse (a name
//     over 255 bytes, a value over 64 KiB, a security.capability that is
//     not a revision 2 or 3 capability set) refuses the layer.
//   - OCI whiteouts: ".wh.<name>" becomes an overlayfs whiteout, a 0/0
//     character device named <name>; ".wh..wh..opq" sets
//     trusted.overlay.opaque=y on its directory. Both need root (or
//     CAP_MKNOD and CAP_SYS_ADMIN).
//   - An entry that would replace a non-empty directory is refused; any
//     other existing entry is removed and replaced, except a directory by
//     a directory, which is kept and gets the new metadata.
//   - Limits bound the total size of extracted files, the number of entries,
//     the length of names and the expansion of gzip input: the number of
//     bytes the gzip stream has produced is compared with the number of
//     compressed bytes read as it goes, so a gzip bomb is refused after a
//     few compressed megabytes rather than after writing gigabytes.
//     The context is checked between entries and between buffers of data.
//
// A refused archive yields an error wrapping errdefs.ErrInvalidArgument
// whose message names the entry and the reason; so does a system call that
// fails because of what the entry asks for (a name component the
// filesystem cannot hold, a time or attribute it refuses), while a full
// disk is errdefs.ErrResourceExhausted and any other failure the host's. A non-empty destination
// yields errdefs.ErrFailedPrecondition, zstd input errdefs.ErrNotSupported.
// Errors from the source reader are returned as they are (wrapped), not as
// invalid arguments. On any error the destination may hold part of the
// layer and the caller removes it; nothing is ever created outside it.
//
// This package imports only the standard library, golang.org/x/sys/unix and
// corral/internal/errdefs; it must not import anything else from Corral.
package tarx
