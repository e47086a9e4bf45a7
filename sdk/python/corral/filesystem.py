"""Files in a sandbox: read, write, copy (streamed), list, stat, mkdir, remove."""

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Union

from ._http import CHUNK
from .watch import Watch, watch

if TYPE_CHECKING:
    from ._http import Client


class FileEntry:
    """What the daemon reports about one path: name, path, type, size, mode and more."""

    def __init__(self, raw: Dict[str, Any]) -> None:
        self.raw = raw
        self.name: str = raw.get("name", "")
        self.path: str = raw.get("path", "")
        self.type: str = raw.get("type", "")
        self.size: int = int(raw.get("size", 0))
        self.mode: int = int(raw.get("mode", 0))
        self.permissions: str = raw.get("permissions", "")
        self.owner: str = raw.get("owner", "")
        self.modified_at: str = raw.get("modified_at", "")

    @property
    def is_dir(self) -> bool:
        """Whether the path is a directory."""
        return self.type == "dir" or self.type == "directory"

    def __repr__(self) -> str:
        return "FileEntry(path=%r, type=%r, size=%d)" % (self.path, self.type, self.size)


class Filesystem:
    """The files of one sandbox (``sb.filesystem``). Relative paths start at its workdir.

    ``user`` on any call acts as that user (it owns what the call creates);
    without it the sandbox's default user does.
    """

    def __init__(self, client: "Client", sandbox_id: str) -> None:
        self._c = client
        self._base = "/v1/sandboxes/%s" % sandbox_id

    def iter_bytes(self, path: str, user: Optional[str] = None, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """Streams a file's contents in chunks, never holding the whole file."""
        with self._c.request("GET", self._base + "/files", {"path": path, "user": user}, stream=True) as r:
            for b in r.chunks(chunk_size):
                yield b

    def read_bytes(self, path: str, user: Optional[str] = None) -> bytes:
        """A file's contents."""
        return b"".join(self.iter_bytes(path, user))

    def read_text(self, path: str, encoding: str = "utf-8", user: Optional[str] = None) -> str:
        """A file's contents as text."""
        return self.read_bytes(path, user).decode(encoding)

    def _put(self, path: str, body: Any, mode: Optional[int], user: Optional[str]) -> FileEntry:
        q = {"path": path, "user": user, "mode": None if mode is None else "%04o" % mode}
        with self._c.request("PUT", self._base + "/files", q, body, "application/octet-stream") as r:
            raw = r.read()
        return FileEntry(json.loads(raw) if raw.strip() else {"path": path})

    def write_bytes(self, path: str, data: bytes, mode: Optional[int] = None, user: Optional[str] = None) -> FileEntry:
        """Writes ``data`` to a file (replaced atomically), creating missing parents."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("write_bytes wants bytes, got %s" % type(data).__name__)
        return self._put(path, bytes(data), mode, user)

    def write_text(self, path: str, text: str, encoding: str = "utf-8", mode: Optional[int] = None,
                   user: Optional[str] = None) -> FileEntry:
        """Writes ``text`` to a file."""
        if not isinstance(text, str):
            raise TypeError("write_text wants str, got %s" % type(text).__name__)
        return self._put(path, text.encode(encoding), mode, user)

    def copy_from_local(self, local_path: Union[str, "os.PathLike[str]"], remote_path: str,
                        mode: Optional[int] = None, user: Optional[str] = None) -> FileEntry:
        """Uploads a local file into the sandbox, streamed in chunks."""
        def chunks(f: Any) -> Iterator[bytes]:
            while True:
                b = f.read(CHUNK)
                if not b:
                    return
                yield b
        with open(local_path, "rb") as f:
            return self._put(remote_path, chunks(f), mode, user)

    def copy_to_local(self, remote_path: str, local_path: Union[str, "os.PathLike[str]"],
                      user: Optional[str] = None) -> int:
        """Downloads a file from the sandbox, streamed in chunks; returns its size."""
        n = 0
        with open(local_path, "wb") as f:
            for b in self.iter_bytes(remote_path, user):
                f.write(b)
                n += len(b)
        return n

    def list_files(self, path: str = ".", depth: int = 1, user: Optional[str] = None) -> List[FileEntry]:
        """The entries of a directory, ``depth`` levels deep."""
        out = self._c.call("GET", self._base + "/fs/list", {"path": path, "depth": depth, "user": user})
        return [FileEntry(e) for e in (out or {}).get("entries") or []]

    def stat(self, path: str, user: Optional[str] = None) -> FileEntry:
        """Describes a path (raises ``NotFound`` if it does not exist)."""
        return FileEntry(self._c.call("GET", self._base + "/fs/stat", {"path": path, "user": user}))

    def exists(self, path: str, user: Optional[str] = None) -> bool:
        """Whether a path exists."""
        from .errors import NotFound
        try:
            self.stat(path, user)
            return True
        except NotFound:
            return False

    def make_directory(self, path: str, user: Optional[str] = None) -> FileEntry:
        """Creates a directory and its missing parents."""
        req: Dict[str, Any] = {"path": path}
        if user:
            req["user"] = user
        return FileEntry(self._c.call("POST", self._base + "/fs/mkdir", payload=req))

    def remove(self, path: str, recursive: bool = False, user: Optional[str] = None) -> None:
        """Removes a file, or a directory (with its contents when ``recursive``)."""
        req: Dict[str, Any] = {"path": path, "recursive": recursive}
        if user:
            req["user"] = user
        self._c.call("POST", self._base + "/fs/remove", payload=req)

    def watch(self, path: str = ".", recursive: bool = False, user: Optional[str] = None) -> "Watch":
        """Watches a directory; iterate the result for changes as they happen, ``close()`` it when done."""
        return watch(self._c, self._base, path, recursive, user)

    def rename(self, src: str, dst: str, user: Optional[str] = None) -> FileEntry:
        """Moves a path."""
        req: Dict[str, Any] = {"from": src, "to": dst}
        if user:
            req["user"] = user
        return FileEntry(self._c.call("POST", self._base + "/fs/rename", payload=req))
