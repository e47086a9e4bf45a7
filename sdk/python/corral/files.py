"""File objects for files in a sandbox (``sb.open(path, mode)``).

Reading streams the file from the daemon; seeking backwards opens the
stream again. Writing goes to a local spool (memory, then a temporary file
past 8 MiB) that is sent, streamed, when the file is closed: the daemon
replaces files atomically, so others see the old contents until then.
"""

import io
import tempfile
from typing import IO, TYPE_CHECKING, Any, Iterator, Optional, Tuple, cast

from ._http import CHUNK, Response
from .errors import Conflict, ConnectionFailed, InvalidArgument, NotFound

if TYPE_CHECKING:
    from .filesystem import Filesystem

SPOOL_MEMORY = 8 << 20


def open_file(fs: "Filesystem", path: str, mode: str = "r", encoding: Optional[str] = None,
              errors: Optional[str] = None, newline: Optional[str] = None, user: Optional[str] = None) -> IO[Any]:
    """Opens a file in the sandbox as ``open()`` would: see ``Sandbox.open``."""
    kind, plus, binary = _parse_mode(mode)
    if binary and (encoding or errors or newline is not None):
        raise InvalidArgument("binary mode takes no encoding, errors or newline", "invalid_argument")
    buf: Any
    if kind == "r" and not plus:
        buf = io.BufferedReader(_Reader(fs, path, user), CHUNK)
    else:
        raw = _Spooled(fs, path, user, kind, plus)
        buf = io.BufferedRandom(raw) if plus else io.BufferedWriter(raw)
    if binary:
        return cast(IO[Any], buf)
    text = io.TextIOWrapper(buf, encoding=encoding or "utf-8", errors=errors, newline=newline)
    text.mode = mode  # type: ignore[misc]
    return text


def _parse_mode(mode: str) -> Tuple[str, bool, bool]:
    if not isinstance(mode, str) or len(set(mode)) != len(mode) or set(mode) - set("rwaxbt+"):
        raise InvalidArgument("mode %r: letters of r, w, a, x, b, t and +" % (mode,), "invalid_argument")
    kinds = [c for c in mode if c in "rwax"]
    if len(kinds) != 1 or ("b" in mode and "t" in mode):
        raise InvalidArgument("mode %r: exactly one of r, w, a, x, and b or t" % mode, "invalid_argument")
    return kinds[0], "+" in mode, "b" in mode


class _Reader(io.RawIOBase):
    """A file streamed from the daemon; seekable by reading on or opening again."""

    def __init__(self, fs: "Filesystem", path: str, user: Optional[str]) -> None:
        super().__init__()
        self._fs, self.name, self._user = fs, path, user
        self._pos = 0
        self._resp = self._open()
        length = self._resp.raw.getheader("Content-Length")
        self._size: Optional[int] = int(length) if length and length.isdigit() else None

    def _open(self) -> Response:
        return self._fs._c.request("GET", self._fs._base + "/files", {"path": self.name, "user": self._user},
                                   stream=True)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            n = self._resp.raw.readinto(b)
        except (OSError, ValueError) as e:
            raise ConnectionFailed("lost the connection reading %s: %s" % (self.name, e), "unavailable") from None
        self._pos += n
        return n

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            if self._size is None:
                raise io.UnsupportedOperation("the daemon did not say the file's size")
            offset += self._size
        elif whence != io.SEEK_SET:
            raise ValueError("whence: 0, 1 or 2")
        if offset < 0:
            raise ValueError("negative seek position %d" % offset)
        if offset < self._pos:
            self._resp.close()
            self._resp, self._pos = self._open(), 0
        skip = bytearray(min(CHUNK, max(offset - self._pos, 1)))
        while self._pos < offset:
            view = memoryview(skip)[:min(len(skip), offset - self._pos)]
            if self.readinto(view) == 0:
                break
        return self._pos

    def close(self) -> None:
        if not self.closed:
            self._resp.close()
        super().close()


class _Spooled(io.RawIOBase):
    """A file written to a local spool and sent to the sandbox on close."""

    def __init__(self, fs: "Filesystem", path: str, user: Optional[str], kind: str, plus: bool) -> None:
        super().__init__()
        self._fs, self.name, self._user = fs, path, user
        self._plus, self._append = plus, kind == "a"
        self._spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
        try:
            self._load(kind)
        except BaseException:
            self._spool.close()
            raise

    def _load(self, kind: str) -> None:
        if kind == "x" and self._fs.exists(self.name, self._user):
            raise Conflict("%s exists (mode x creates a new file only)" % self.name, "already_exists")
        if kind not in ("a", "r"):
            return
        try:
            for chunk in self._fs.iter_bytes(self.name, self._user):
                self._spool.write(chunk)
        except NotFound:
            if kind == "r":
                raise
        if kind == "r":
            self._spool.seek(0)

    def readable(self) -> bool:
        return self._plus

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if not self._plus:
            raise io.UnsupportedOperation("not readable (open with +)")
        data = self._spool.read(len(b))
        b[:len(data)] = data
        return len(data)

    def write(self, b: Any) -> int:
        if self._append:
            self._spool.seek(0, io.SEEK_END)
        return self._spool.write(bytes(b))

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._spool.seek(offset, whence)

    def tell(self) -> int:
        return self._spool.tell()

    def truncate(self, size: Optional[int] = None) -> int:
        return self._spool.truncate(size)

    def close(self) -> None:
        if self.closed:
            return
        try:
            size = self._spool.seek(0, io.SEEK_END)
            self._spool.seek(0)
            body: Any = self._spool.read() if size <= CHUNK else _chunks(self._spool)
            self._fs._put(self.name, body, None, self._user)
        finally:
            self._spool.close()
            super().close()


def _chunks(f: IO[bytes]) -> Iterator[bytes]:
    while True:
        b = f.read(CHUNK)
        if not b:
            return
        yield b
