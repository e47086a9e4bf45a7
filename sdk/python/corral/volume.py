"""Volume: a named, size-limited store of files that outlives the sandboxes that mount it."""

import json
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union
from urllib.parse import quote

from ._http import CHUNK, Client
from .errors import Conflict, InvalidArgument, NotFound
from .filesystem import FileEntry


def _path(name: str, rest: str = "") -> str:
    return "/v1/volumes/" + quote(name, safe="") + rest


def _name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgument("volume name: a non-empty str", "invalid_argument")
    return name


class Volume:
    """A named volume (``corral volume``): files kept on the daemon's host.

    Mount one into sandboxes with ``Sandbox.create(volumes={"/data": vol})``
    (or its name); several sandboxes can mount one at once, read-write or
    read-only. Its files are also read and written here without a sandbox.
    ``info`` holds what the daemon last reported about it.
    """

    def __init__(self, client: Client, info: Dict[str, Any]) -> None:
        self._client = client
        self.info = info
        self.name: str = info["name"]

    def __repr__(self) -> str:
        return "Volume(%s)" % self.name

    @property
    def size_gib(self) -> int:
        """Its size limit in GiB."""
        return int(self.info.get("size_gib") or 0)

    @property
    def mounted_by(self) -> List[str]:
        """The live sandboxes that mount it, as last reported."""
        return list(self.info.get("mounted_by") or [])

    @property
    def used_bytes(self) -> Optional[int]:
        """Bytes in use, as last reported (None while a vm sandbox holds it)."""
        v = self.info.get("used_bytes")
        return None if v is None else int(v)

    @classmethod
    def create(cls, name: str, size_gib: Optional[int] = None, client: Optional[Client] = None) -> "Volume":
        """Makes a volume of ``size_gib`` GiB (None: the daemon's default, 1 GiB).

        Raises ``Conflict`` if one of that name exists.
        """
        if size_gib is not None and (isinstance(size_gib, bool) or not isinstance(size_gib, int) or size_gib < 1):
            raise InvalidArgument("size_gib: a positive int, not %r" % (size_gib,), "invalid_argument")
        c = client or Client()
        body: Dict[str, Any] = {"name": _name(name)}
        if size_gib is not None:
            body["size_gib"] = size_gib
        return cls(c, c.call("POST", "/v1/volumes", payload=body))

    @classmethod
    def from_name(cls, name: str, create_if_missing: bool = False, size_gib: Optional[int] = None,
                  client: Optional[Client] = None) -> "Volume":
        """The volume called ``name`` (raises ``NotFound``, or makes it if ``create_if_missing``)."""
        c = client or Client()
        try:
            return cls(c, c.call("GET", _path(_name(name))))
        except NotFound:
            if not create_if_missing:
                raise
        try:
            return cls.create(name, size_gib, c)
        except Conflict:  # made by someone else meanwhile
            return cls(c, c.call("GET", _path(name)))

    @classmethod
    def list(cls, client: Optional[Client] = None) -> "List[Volume]":
        """Every volume."""
        c = client or Client()
        out = c.call("GET", "/v1/volumes") or {}
        return [cls(c, v) for v in out.get("volumes") or []]

    def refresh(self) -> Dict[str, Any]:
        """Fetches what the daemon reports about the volume now (usage, mounts)."""
        self.info = self._client.call("GET", _path(self.name))
        return self.info

    def remove(self, force: bool = False) -> None:
        """Deletes the volume and its files.

        Refused (``Conflict``) while live sandboxes mount it, unless ``force``,
        which terminates them first.
        """
        self._client.call("DELETE", _path(self.name), {"force": "true" if force else None})

    def mount(self, path: str, read_only: bool = False) -> Dict[str, Any]:
        """A mount of this volume at ``path``, for ``Sandbox.create(volumes=[...])``."""
        return {"name": self.name, "path": path, "read_only": read_only}

    def iter_bytes(self, path: str, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """Streams a file of the volume in chunks (no sandbox needed)."""
        with self._client.request("GET", _path(self.name, "/files"), {"path": path}, stream=True) as r:
            for b in r.chunks(chunk_size):
                yield b

    def read_bytes(self, path: str) -> bytes:
        """A file's contents (no sandbox needed)."""
        return b"".join(self.iter_bytes(path))

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """A file's contents as text."""
        return self.read_bytes(path).decode(encoding)

    def _put(self, path: str, body: Any, mode: Optional[int]) -> FileEntry:
        q = {"path": path, "mode": None if mode is None else "%04o" % mode}
        with self._client.request("PUT", _path(self.name, "/files"), q, body, "application/octet-stream") as r:
            raw = r.read()
        return FileEntry(json.loads(raw) if raw.strip() else {"path": path})

    def write_bytes(self, path: str, data: bytes, mode: Optional[int] = None) -> FileEntry:
        """Writes ``data`` to a file of the volume, creating missing parents (no sandbox needed)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("write_bytes wants bytes, got %s" % type(data).__name__)
        return self._put(path, bytes(data), mode)

    def write_text(self, path: str, text: str, encoding: str = "utf-8", mode: Optional[int] = None) -> FileEntry:
        """Writes ``text`` to a file of the volume."""
        if not isinstance(text, str):
            raise TypeError("write_text wants str, got %s" % type(text).__name__)
        return self._put(path, text.encode(encoding), mode)

    def copy_from_local(self, local_path: Union[str, "os.PathLike[str]"], remote_path: str,
                        mode: Optional[int] = None) -> FileEntry:
        """Uploads a local file into the volume, streamed in chunks."""
        def chunks(f: Any) -> Iterator[bytes]:
            while True:
                b = f.read(CHUNK)
                if not b:
                    return
                yield b
        with open(local_path, "rb") as f:
            return self._put(remote_path, chunks(f), mode)

    def copy_to_local(self, remote_path: str, local_path: Union[str, "os.PathLike[str]"]) -> int:
        """Downloads a file of the volume, streamed; returns its size."""
        n = 0
        with open(local_path, "wb") as f:
            for b in self.iter_bytes(remote_path):
                f.write(b)
                n += len(b)
        return n

    def list_files(self, path: str = "/") -> List[FileEntry]:
        """The entries of a directory of the volume ("/" is its root)."""
        out = self._client.call("GET", _path(self.name, "/list"), {"path": path})
        return [FileEntry(e) for e in (out or {}).get("entries") or []]


VolumeSpec = Union[Mapping[str, Union[str, Volume]], Sequence[Mapping[str, Any]]]


def volume_mounts(volumes: Optional[VolumeSpec]) -> Optional[List[Dict[str, Any]]]:
    """The API's ``volumes`` from ``{"/path": name or Volume}`` or a list of mounts."""
    if not volumes:
        return None
    if isinstance(volumes, Mapping):
        out = []
        for path, v in volumes.items():
            v = getattr(v, "sync", v)  # an aio AsyncVolume
            name = v.name if isinstance(v, Volume) else v
            if not isinstance(path, str) or not isinstance(name, str):
                raise InvalidArgument("volumes: {\"/path\": name or Volume}, not %r: %r" % (path, v),
                                      "invalid_argument")
            out.append({"name": name, "path": path})
        return out
    if isinstance(volumes, (str, bytes)):
        raise InvalidArgument("volumes: a mapping {\"/path\": name} or a list of mounts, not a string",
                              "invalid_argument")
    mounts = []
    for m in volumes:
        if not isinstance(m, Mapping):
            raise InvalidArgument("volumes: each mount is {\"name\", \"path\", \"read_only\"}, not %r" % (m,),
                                  "invalid_argument")
        d = dict(m)
        d["name"] = getattr(d.get("name"), "sync", d.get("name"))
        if isinstance(d.get("name"), Volume):
            d["name"] = d["name"].name
        mounts.append(d)
    return mounts
