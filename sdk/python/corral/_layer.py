"""The layer of an Image's copy step: a local file or directory tarred at its
destination, normalised so that the same content always gives the same bytes
(and so the same digest, the step's cache key), as ``corral image build`` does:
owner 0:0 without names, one fixed modification time, permission bits only,
entries in lexical order, symlinks kept as symlinks, device nodes, sockets and
FIFOs left out, and every parent of the destination a 0755 directory first."""

import hashlib
import json
import os
import stat
import tarfile
import tempfile
from typing import IO, TYPE_CHECKING, Iterator, List, Tuple, cast
from urllib.parse import quote

from ._http import CHUNK
from .errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    from ._http import Client

NORMAL_TIME = 946684800  # 2000-01-01T00:00:00Z


class _HashingFile:
    """A file that hashes what is written to it."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.h = hashlib.sha256()

    def write(self, b: bytes) -> int:
        self.h.update(b)
        return self.f.write(b)


def write_layer(out: IO[bytes], src: str, dst: str) -> str:
    """Writes the normalised tar of ``src`` at ``dst`` to ``out``; returns its sha256 digest."""
    if not dst.startswith("/") or "\0" in dst:
        raise InvalidArgument("copy destination %r: an absolute path" % dst, "invalid_argument")
    name = os.path.normpath(dst).lstrip("/")
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        raise InvalidArgument("%s is a symlink; name its target instead" % src, "invalid_argument")
    if stat.S_ISREG(st.st_mode) and dst.endswith("/"):
        name = (name + "/" if name else "") + os.path.basename(src)
    elif not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
        raise InvalidArgument("%s is not a regular file or a directory" % src, "invalid_argument")
    hf = _HashingFile(out)
    with tarfile.open(fileobj=cast(IO[bytes], hf), mode="w|", format=tarfile.PAX_FORMAT) as tw:
        parts = name.split("/") if name else []
        for i in range(1, len(parts)):
            tw.addfile(_dir_info("/".join(parts[:i]), 0o755))
        for path, arc in _walk(src, name):
            _add(tw, path, arc)
    return "sha256:" + hf.h.hexdigest()


def _walk(src: str, name: str) -> Iterator[Tuple[str, str]]:
    """(local path, entry name) for src and, for a directory, all below it, depth first in lexical order."""
    if name:
        yield src, name
    if not os.path.isdir(src) or os.path.islink(src):
        return
    for entry in sorted(os.listdir(src)):
        yield from _walk(os.path.join(src, entry), (name + "/" if name else "") + entry)


def _dir_info(name: str, mode: int) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name + "/")
    ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, mode, NORMAL_TIME
    ti.uname = ti.gname = ""
    return ti


def _add(tw: tarfile.TarFile, path: str, arc: str) -> None:
    st = os.lstat(path)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISDIR(st.st_mode):
        tw.addfile(_dir_info(arc, mode))
        return
    ti = tarfile.TarInfo(arc)
    ti.mode, ti.mtime = mode, NORMAL_TIME
    ti.uname = ti.gname = ""
    if stat.S_ISLNK(st.st_mode):
        ti.type, ti.linkname = tarfile.SYMTYPE, os.readlink(path)
        tw.addfile(ti)
    elif stat.S_ISREG(st.st_mode):
        ti.size = st.st_size
        with open(path, "rb") as f:
            tw.addfile(ti, f)
    # device nodes, sockets and FIFOs are left out: the layer extractor refuses them


def upload_dir(c: "Client", src: str, dst: str) -> str:
    """Makes the layer of a copy step and uploads it unless the daemon has it; returns its digest."""
    with tempfile.TemporaryFile() as f:
        digest = write_layer(f, src, dst)
        try:
            c.call("GET", "/v1/images/layers/" + quote(digest, safe=":"))
            return digest
        except NotFound:
            pass
        f.seek(0)
        with c.request("POST", "/v1/images/layers", None, _chunks(f), "application/x-tar") as r:
            info = json.loads(r.read() or b"{}")
    return str(info.get("digest") or digest)


def _chunks(f: IO[bytes]) -> Iterator[bytes]:
    while True:
        b = f.read(CHUNK)
        if not b:
            return
        yield b


__all__: List[str] = []
