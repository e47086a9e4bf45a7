"""A process started in a sandbox: its output streams, stdin and exit."""

import base64
import collections
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Union

from ._http import Response
from .errors import CorralError, SandboxTimeout

if TYPE_CHECKING:
    from ._http import Client

_EOF = object()


class StreamReader:
    """One output stream of a process (stdout or stderr), read as it arrives.

    Iterating yields text lines (with their newline); ``iter_bytes`` yields
    raw chunks; ``read`` / ``read_bytes`` wait for the end and return it all.
    A stream can be consumed once. ``corral.aio`` reads the same stream
    with ``async for``.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._chunks: "collections.deque[bytes]" = collections.deque()
        self._eof = False
        self._listeners: List[Callable[[], None]] = []

    def _put(self, data: bytes) -> None:
        with self._cond:
            self._chunks.append(data)
            self._cond.notify_all()
            listeners = list(self._listeners)
        for fn in listeners:
            fn()

    def _close(self) -> None:
        with self._cond:
            self._eof = True
            self._cond.notify_all()
            listeners = list(self._listeners)
        for fn in listeners:
            fn()

    def _take(self) -> Union[bytes, None, object]:
        """The next chunk, _EOF at the end, or None when nothing has come yet (never waits)."""
        with self._cond:
            if self._chunks:
                return self._chunks.popleft()
            return _EOF if self._eof else None

    def _listen(self, fn: Callable[[], None]) -> None:
        """Calls ``fn`` (from the reader thread) whenever data or the end arrives."""
        with self._cond:
            self._listeners.append(fn)

    def _unlisten(self, fn: Callable[[], None]) -> None:
        with self._cond:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def iter_bytes(self) -> Iterator[bytes]:
        """Yields chunks of output as the daemon sends them, until the process's end."""
        while True:
            with self._cond:
                while not self._chunks and not self._eof:
                    self._cond.wait()
                if not self._chunks:
                    return
                item = self._chunks.popleft()
            yield item

    def iter_lines_bytes(self) -> Iterator[bytes]:
        """Yields output lines as bytes (with their newline; the last may lack it)."""
        splitter = LineSplitter()
        for chunk in self.iter_bytes():
            yield from splitter.feed(chunk)
        yield from splitter.end()

    def __iter__(self) -> Iterator[str]:
        """Yields output lines as text (UTF-8, undecodable bytes replaced), with their newline."""
        for line in self.iter_lines_bytes():
            yield line.decode("utf-8", "replace")

    def read_bytes(self) -> bytes:
        """Waits for the stream's end and returns all of what is left of it."""
        return b"".join(self.iter_bytes())

    def read(self) -> str:
        """Waits for the stream's end and returns what is left of it as text."""
        return self.read_bytes().decode("utf-8", "replace")


class LineSplitter:
    """Cuts a byte stream into lines (each with its newline) as chunks come."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> List[bytes]:
        """The lines completed by ``chunk``."""
        self._buf += chunk
        out: List[bytes] = []
        while True:
            i = self._buf.find(b"\n")
            if i < 0:
                return out
            out.append(self._buf[:i + 1])
            self._buf = self._buf[i + 1:]

    def end(self) -> List[bytes]:
        """What is left at the stream's end (a last line without newline), if anything."""
        rest, self._buf = self._buf, b""
        return [rest] if rest else []


class StdinWriter:
    """A process's stdin: each ``write`` is sent to the process at once."""

    def __init__(self, client: "Client", path: str) -> None:
        self._client = client
        self._path = path
        self._closed = False

    def write(self, data: Union[bytes, str]) -> None:
        """Sends ``data`` (text is encoded as UTF-8) to the process's stdin."""
        if self._closed:
            raise CorralError("stdin is closed", "failed_precondition")
        if isinstance(data, str):
            data = data.encode()
        if not data:
            return
        self._client.request("POST", self._path, None, data, "application/octet-stream").close()

    def write_eof(self) -> None:
        """Closes the process's stdin: it reads end of file."""
        if self._closed:
            return
        self._closed = True
        self._client.request("POST", self._path, {"close": "true"}, b"", "application/octet-stream").close()

    def drain(self) -> None:
        """Present for symmetry with Modal's API: writes are sent at once, so this does nothing."""


class Process:
    """A process in a sandbox, from ``Sandbox.exec``.

    ``stdout`` and ``stderr`` stream its output (with ``pty=True`` all
    output comes on ``stdout``); ``stdin`` writes to it; ``wait`` returns
    its exit code. A reader thread takes the daemon's event stream apart.
    """

    def __init__(self, client: "Client", sandbox_id: str, resp: Response, pid: int) -> None:
        self.pid = pid
        self.sandbox_id = sandbox_id
        self.stdout = StreamReader()
        self.stderr = StreamReader()
        self.stdin = StdinWriter(client, "/v1/sandboxes/%s/processes/%d/stdin" % (sandbox_id, pid))
        self.timed_out = False
        self.signal: Optional[str] = None
        self.oom_killed = False
        self.error: Optional[str] = None
        self._client = client
        self._resp = resp
        self._returncode: Optional[int] = None
        self._done = threading.Event()
        self._done_lock = threading.Lock()
        self._done_callbacks: List[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._read, name="corral-exec-%d" % pid, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for ev in self._resp.json_lines():
                kind = ev.get("type")
                if kind in ("stdout", "pty"):
                    self.stdout._put(base64.b64decode(ev.get("data") or ""))
                elif kind == "stderr":
                    self.stderr._put(base64.b64decode(ev.get("data") or ""))
                elif kind == "end":
                    self._end(ev)
                    break
        except Exception as e:  # a broken stream: report it as the process's error
            self.error = "reading the process's output: %s" % e
        finally:
            if self._returncode is None:
                self.error = self.error or "the process's stream ended before the process did"
                self._returncode = -1
            self.stdout._close()
            self.stderr._close()
            self._resp.close()
            with self._done_lock:
                self._done.set()
                callbacks, self._done_callbacks = self._done_callbacks, []
            for fn in callbacks:
                fn()

    def _on_done(self, fn: Callable[[], None]) -> None:
        """Calls ``fn`` once the process ended (at once if it has)."""
        with self._done_lock:
            if not self._done.is_set():
                self._done_callbacks.append(fn)
                return
        fn()

    def _end(self, ev: Dict[str, Any]) -> None:
        self.timed_out = bool(ev.get("timed_out"))
        self.signal = ev.get("signal") or None
        self.oom_killed = bool(ev.get("oom_killed"))
        self.error = ev.get("error") or None
        self._returncode = int(ev.get("exit_code", -1))

    @property
    def returncode(self) -> Optional[int]:
        """The exit code once the process ended (128+n when killed by signal n), else None."""
        return self._returncode if self._done.is_set() else None

    def poll(self) -> Optional[int]:
        """The exit code if the process ended, else None, without waiting."""
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        """Waits for the end (at most ``timeout`` seconds) and returns the exit code.

        Raises ``SandboxTimeout`` if ``timeout`` passes first (the process goes on).
        """
        if not self._done.wait(timeout):
            raise SandboxTimeout("process %d still running after %s s" % (self.pid, timeout), "deadline_exceeded")
        assert self._returncode is not None
        return self._returncode

    def send_signal(self, signal: str) -> None:
        """Sends a signal ("TERM", "KILL", "9") to the process's group."""
        path = "/v1/sandboxes/%s/processes/%d/signal" % (self.sandbox_id, self.pid)
        try:
            self._client.call("POST", path, payload={"signal": signal})
        except CorralError:
            if not self._done.is_set():
                raise

    def kill(self) -> None:
        """Kills the process (SIGKILL to its group)."""
        self.send_signal("KILL")

    def terminate(self) -> None:
        """Asks the process to end (SIGTERM to its group)."""
        self.send_signal("TERM")

    def resize(self, cols: int, rows: int) -> None:
        """Resizes the process's PTY."""
        path = "/v1/sandboxes/%s/processes/%d/resize" % (self.sandbox_id, self.pid)
        self._client.call("POST", path, payload={"cols": cols, "rows": rows})


def start(client: "Client", sandbox_id: str, req: Dict[str, Any]) -> Process:
    """Starts a process and returns it once the daemon reported its start."""
    import json
    resp = client.request("POST", "/v1/sandboxes/%s/processes" % sandbox_id, None,
                          json.dumps(req).encode(), "application/json", stream=True)
    lines = resp.json_lines()
    first: Optional[Dict[str, Any]] = next(lines, None)
    if first is None or first.get("type") != "start":
        resp.close()
        msg = (first or {}).get("error") or "the process stream began without a start event"
        raise CorralError(str(msg))
    return Process(client, sandbox_id, resp, int(first.get("pid", 0)))


def args_list(args: Any) -> List[str]:
    """Checks a command's arguments are strings (a clear error beats a 400 later)."""
    out: List[str] = []
    for a in args:
        if not isinstance(a, str):
            from .errors import InvalidArgument
            raise InvalidArgument("command arguments must be str, got %s" % type(a).__name__, "invalid_argument")
        out.append(a)
    return out


__all__ = ["Process", "StreamReader", "StdinWriter", "LineSplitter"]
