"""The HTTP transport: one connection per request, timeouts on connect, typed errors."""

import http.client
import json
import os
import socket
import urllib.parse
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional, Union

from .errors import ConnectionFailed, CorralError, error_for

DEFAULT_URL = "http://127.0.0.1:7070"
DEFAULT_TOKEN_FILE = "/var/lib/corral/token"
CHUNK = 1 << 20

Body = Union[None, bytes, Iterable[bytes]]


class Client:
    """A connection to one Corral daemon: its base URL and API token.

    ``connect_timeout`` bounds reaching the daemon; ``read_timeout`` bounds
    waiting for a reply to an ordinary call (streams wait as long as needed).
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None,
                 connect_timeout: float = 10.0, read_timeout: float = 600.0) -> None:
        self.url = (url or os.environ.get("CORRAL_URL") or DEFAULT_URL).rstrip("/")
        if token is None:
            token = os.environ.get("CORRAL_TOKEN") or _read_token_file()
        self.token = token
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CorralError("CORRAL_URL must be http(s)://host[:port], not %r" % self.url, "invalid_argument")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")

    def _connect(self, stream: bool) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn: http.client.HTTPConnection = cls(self._host, self._port, timeout=self.connect_timeout)
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionFailed("cannot reach corral at %s: %s" % (self.url, e), "unavailable") from None
        assert conn.sock is not None
        conn.sock.settimeout(None if stream else self.read_timeout)
        return conn

    def request(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None,
                body: Body = None, content_type: str = "", stream: bool = False) -> "Response":
        """Sends a request; returns the response if 2xx, else raises its typed error."""
        url = self._prefix + path
        q = {k: v for k, v in (query or {}).items() if v is not None}
        if q:
            url += "?" + urllib.parse.urlencode(q, doseq=True)
        headers = {"Authorization": "Bearer " + self.token}
        if content_type:
            headers["Content-Type"] = content_type
        conn = self._connect(stream)
        try:
            if body is None or isinstance(body, bytes):
                conn.request(method, url, body=body, headers=headers)
            else:
                headers["Transfer-Encoding"] = "chunked"
                conn.request(method, url, body=body, headers=headers, encode_chunked=True)
            resp = conn.getresponse()
        except socket.timeout:
            conn.close()
            raise ConnectionFailed("corral at %s did not answer in time" % self.url, "unavailable") from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionFailed("lost the connection to corral at %s: %s" % (self.url, e), "unavailable") from None
        if resp.status // 100 != 2:
            raw = resp.read(1 << 20)
            conn.close()
            raise _decode_error(resp.status, resp.reason, raw)
        return Response(conn, resp)

    def call(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None,
             payload: Any = None, wait: bool = False) -> Any:
        """Sends ``payload`` as JSON (if not None) and decodes the JSON reply (None if empty).

        ``wait``: the reply may take arbitrarily long (no read timeout).
        """
        body = None if payload is None else json.dumps(payload).encode()
        with self.request(method, path, query, body, "application/json" if body else "", stream=wait) as r:
            raw = r.read()
        return json.loads(raw) if raw.strip() else None


class Response:
    """A 2xx response whose body is read, streamed as chunks or as lines."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self.raw = resp
        self.status = resp.status

    def read(self) -> bytes:
        """The whole body."""
        try:
            return self.raw.read()
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed("lost the connection to corral: %s" % e, "unavailable") from None

    def chunks(self, size: int = CHUNK) -> Iterator[bytes]:
        """The body in chunks of at most ``size`` bytes."""
        while True:
            try:
                b = self.raw.read(size)
            except (OSError, http.client.HTTPException) as e:
                raise ConnectionFailed("lost the connection to corral: %s" % e, "unavailable") from None
            if not b:
                return
            yield b

    def json_lines(self) -> Iterator[Dict[str, Any]]:
        """Decodes an NDJSON body line by line as lines arrive."""
        while True:
            try:
                line = self.raw.readline()
            except (OSError, ValueError, http.client.HTTPException):
                return
            if not line:
                return
            if line.strip():
                yield json.loads(line)

    def close(self) -> None:
        """Closes the connection (ending a foreground process's stream kills it)."""
        try:
            if self._conn.sock is not None:
                self._conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._conn.close()

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _decode_error(status: int, reason: str, raw: bytes) -> CorralError:
    try:
        detail = json.loads(raw)["error"]
        return error_for(str(detail["code"]), str(detail["message"]), status)
    except (ValueError, KeyError, TypeError):
        text = raw.decode("utf-8", "replace").strip()
        code = {404: "not_found", 400: "invalid_argument", 401: "unauthenticated", 409: "failed_precondition",
                429: "resource_exhausted", 504: "deadline_exceeded"}.get(status, "internal")
        return error_for(code, "%d %s: %s" % (status, reason, text), status)


def _read_token_file() -> str:
    path = os.environ.get("CORRAL_TOKEN_FILE") or DEFAULT_TOKEN_FILE
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        raise CorralError("no CORRAL_TOKEN set and cannot read the token file %s: %s" % (path, e.strerror),
                          "unauthenticated") from None
