"""Exposed ports: their URLs through the daemon, and raw TCP tunnels to them."""

import socket
import urllib.parse
from typing import TYPE_CHECKING, Any, Dict, Tuple

from ._http import _decode_error
from .errors import ConnectionFailed, CorralError, InvalidArgument

if TYPE_CHECKING:
    from ._http import Client

_MAX_HEAD = 64 << 10


class Tunnel:
    """One exposed port of a sandbox (``sb.tunnel(port)``, ``sb.tunnels()``).

    ``url`` reaches the port over HTTP through the daemon (its
    ``/v1/sandboxes/{id}/ports/{port}/`` proxy), carrying the sandbox's port
    token as ``corral_token`` unless the port is public: open it with any
    HTTP client. ``connect()`` opens a raw TCP stream to the port instead.
    """

    def __init__(self, client: "Client", sandbox_id: str, raw: Dict[str, Any], port_token: str) -> None:
        self._client = client
        self.sandbox_id = sandbox_id
        self.port: int = int(raw["port"])
        self.public: bool = bool(raw.get("public"))
        self.token: str = "" if self.public else port_token
        path = raw.get("url") or "/v1/sandboxes/%s/ports/%d/" % (urllib.parse.quote(sandbox_id, safe=""), self.port)
        self._base = client.url + path
        self.url: str = self.url_for("")

    def url_for(self, path: str = "", query: str = "") -> str:
        """The URL of ``path`` on the port (relative to its root), with ``query`` and the token."""
        q = [query] if query else []
        if self.token:
            q.append(urllib.parse.urlencode({"corral_token": self.token}))
        u = self._base.rstrip("/") + "/" + path.lstrip("/")
        return u + ("?" + "&".join(q) if q else "")

    def __repr__(self) -> str:
        return "Tunnel(port=%d, public=%s)" % (self.port, self.public)

    def connect(self, timeout: float = 10.0) -> socket.socket:
        """Opens a raw TCP stream to the port (HTTP Upgrade ``corral-tcp``); returns the socket.

        ``timeout`` bounds reaching the daemon and its answer; the socket
        returned blocks without a timeout. Needs an http:// daemon URL.
        """
        c = self._client
        if c._scheme != "http":
            raise InvalidArgument("tunnels need an http:// daemon URL, not %s" % c.url, "invalid_argument")
        try:
            sock = socket.create_connection((c._host, c._port or 80), timeout=timeout)
        except OSError as e:
            raise ConnectionFailed("cannot reach corral at %s: %s" % (c.url, e), "unavailable") from None
        try:
            path = "%s/v1/sandboxes/%s/tunnel/%d" % (c._prefix, urllib.parse.quote(self.sandbox_id, safe=""),
                                                     self.port)
            req = ("GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\n"
                   "Upgrade: corral-tcp\r\n\r\n" % (path, c._host, c.token))
            sock.sendall(req.encode())
            status, reason, body = _read_head(sock)
        except OSError as e:
            sock.close()
            raise ConnectionFailed("tunnel to port %d: %s" % (self.port, e), "unavailable") from None
        except BaseException:
            sock.close()
            raise
        if status != 101:
            sock.close()
            raise _decode_error(status, reason, body)
        sock.settimeout(None)
        return sock


def _read_head(sock: socket.socket) -> Tuple[int, str, bytes]:
    """Reads an HTTP response head a byte at a time (nothing past it is consumed).

    For a refusal it also reads what body fits in a bounded read.
    """
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = sock.recv(1)
        if not b:
            raise ConnectionFailed("the daemon closed the tunnel before answering", "unavailable")
        head += b
        if len(head) > _MAX_HEAD:
            raise CorralError("the daemon's answer to a tunnel request is too long")
    first = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
    try:
        status = int(first[1])
    except (IndexError, ValueError):
        raise CorralError("the daemon answered a tunnel request with %r" % first) from None
    reason = first[2] if len(first) > 2 else ""
    body = b""
    if status != 101:
        sock.settimeout(2)
        try:
            body = sock.recv(1 << 16)
        except OSError:
            pass
    return status, reason, body


def tunnels(client: "Client", info: Dict[str, Any]) -> Dict[int, Tunnel]:
    """The exposed ports a sandbox's record lists, by port."""
    token = str(info.get("port_token") or "")
    out: Dict[int, Tunnel] = {}
    for raw in info.get("ports") or []:
        t = Tunnel(client, str(info["id"]), raw, token)
        out[t.port] = t
    return out


__all__ = ["Tunnel"]
