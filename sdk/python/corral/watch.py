"""Watching a directory in a sandbox: changes as they happen."""

from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional

from .errors import CorralError

if TYPE_CHECKING:
    from ._http import Client, Response


class WatchEvent:
    """One change: ``type`` (create, write, remove, rename, chmod, overflow, end),
    ``path`` inside the sandbox, ``name`` relative to the watched directory, ``dir``."""

    def __init__(self, raw: Dict[str, Any]) -> None:
        self.raw = raw
        self.type: str = raw.get("type", "")
        self.path: str = raw.get("path", "")
        self.name: str = raw.get("name", "")
        self.dir: bool = bool(raw.get("dir"))
        self.error: str = raw.get("error", "")

    def __repr__(self) -> str:
        return "WatchEvent(%s %r)" % (self.type, self.path)


class Watch:
    """A directory watch; iterate it for ``WatchEvent``s (keepalives are dropped).

    Iteration ends with the watch (its ``end`` event is the last one yielded)
    or when ``close`` is called; use it as a context manager to close it.
    """

    def __init__(self, resp: "Response", path: str) -> None:
        self._resp = resp
        self.path = path
        self._lines = resp.json_lines()

    def __iter__(self) -> Iterator[WatchEvent]:
        for raw in self._lines:
            if raw.get("type") == "keepalive":
                continue
            ev = WatchEvent(raw)
            yield ev
            if ev.type == "end":
                return

    def close(self) -> None:
        """Stops the watch."""
        self._resp.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def watch(client: "Client", base: str, path: str, recursive: bool, user: Optional[str]) -> Watch:
    """Starts a watch and returns it once the daemon confirmed it (the start event)."""
    q = {"path": path, "recursive": "true" if recursive else None, "user": user}
    resp = client.request("GET", base + "/files/watch", q, stream=True)
    first = next(resp.json_lines(), None)
    if first is None or first.get("type") != "start":
        resp.close()
        raise CorralError("the watch stream began without a start event: %s" % ((first or {}).get("error") or ""))
    return Watch(resp, str(first.get("path") or path))
