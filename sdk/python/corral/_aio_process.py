"""The asyncio face of a process: output read with ``async for``, an awaitable exit.

Output and the exit are awaited without a thread: the process's reader
thread wakes the event loop (``call_soon_threadsafe``), so cancelling a task
that waits on them cancels nothing but the wait, and loses no output.
"""

import asyncio
from typing import AsyncIterator, Callable, Optional, Union

from .errors import SandboxTimeout
from .process import _EOF, LineSplitter, Process, StdinWriter, StreamReader


def _waker(loop: asyncio.AbstractEventLoop, ev: asyncio.Event) -> Callable[[], None]:
    def wake() -> None:
        try:
            loop.call_soon_threadsafe(ev.set)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass
    return wake


class AsyncStreamReader:
    """One output stream of an ``AsyncProcess``: ``async for line in p.stdout``.

    ``iter_bytes()`` yields raw chunks, ``iter_lines_bytes()`` byte lines;
    ``read()`` / ``read_bytes()`` wait for the end and return the rest.
    """

    def __init__(self, stream: StreamReader) -> None:
        self.sync = stream

    async def _next(self) -> Optional[bytes]:
        """The next chunk, or None at the end."""
        ev = asyncio.Event()
        wake = _waker(asyncio.get_running_loop(), ev)
        self.sync._listen(wake)
        try:
            while True:
                item = self.sync._take()
                if item is _EOF:
                    return None
                if isinstance(item, bytes):
                    return item
                await ev.wait()
                ev.clear()
        finally:
            self.sync._unlisten(wake)

    async def iter_bytes(self) -> AsyncIterator[bytes]:
        """Yields chunks of output as they arrive, until the process's end."""
        while True:
            chunk = await self._next()
            if chunk is None:
                return
            yield chunk

    async def iter_lines_bytes(self) -> AsyncIterator[bytes]:
        """Yields output lines as bytes (with their newline; the last may lack it)."""
        splitter = LineSplitter()
        async for chunk in self.iter_bytes():
            for line in splitter.feed(chunk):
                yield line
        for line in splitter.end():
            yield line

    async def __aiter__(self) -> AsyncIterator[str]:
        """Yields output lines as text (UTF-8, undecodable bytes replaced)."""
        async for line in self.iter_lines_bytes():
            yield line.decode("utf-8", "replace")

    async def read_bytes(self) -> bytes:
        """Waits for the stream's end and returns what is left of it."""
        return b"".join([c async for c in self.iter_bytes()])

    async def read(self) -> str:
        """Waits for the stream's end and returns what is left of it as text."""
        return (await self.read_bytes()).decode("utf-8", "replace")


class AsyncStdinWriter:
    """An ``AsyncProcess``'s stdin."""

    def __init__(self, stdin: StdinWriter) -> None:
        self.sync = stdin

    async def write(self, data: Union[bytes, str]) -> None:
        """Sends ``data`` to the process's stdin."""
        await asyncio.to_thread(self.sync.write, data)

    async def write_eof(self) -> None:
        """Closes the process's stdin."""
        await asyncio.to_thread(self.sync.write_eof)

    async def drain(self) -> None:
        """Writes are sent at once; present for symmetry with asyncio streams."""


class AsyncProcess:
    """A process in a sandbox, from ``AsyncSandbox.exec``; ``sync`` is the ``Process``."""

    def __init__(self, proc: Process) -> None:
        self.sync = proc
        self.pid = proc.pid
        self.stdout = AsyncStreamReader(proc.stdout)
        self.stderr = AsyncStreamReader(proc.stderr)
        self.stdin = AsyncStdinWriter(proc.stdin)

    @property
    def returncode(self) -> Optional[int]:
        """The exit code once the process ended, else None."""
        return self.sync.returncode

    def poll(self) -> Optional[int]:
        """The exit code if the process ended, else None."""
        return self.sync.poll()

    async def wait(self, timeout: Optional[float] = None) -> int:
        """Waits for the end (at most ``timeout`` seconds: ``SandboxTimeout``) and returns the exit code.

        Cancelling the wait leaves the process running.
        """
        loop = asyncio.get_running_loop()
        ev = asyncio.Event()
        self.sync._on_done(_waker(loop, ev))
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except asyncio.TimeoutError:
            raise SandboxTimeout("process %d still running after %s s" % (self.pid, timeout),
                                 "deadline_exceeded") from None
        return self.sync.wait(0)

    async def send_signal(self, signal: str) -> None:
        """Sends a signal ("TERM", "KILL", "9") to the process's group."""
        await asyncio.to_thread(self.sync.send_signal, signal)

    async def kill(self) -> None:
        """Kills the process (SIGKILL to its group)."""
        await asyncio.to_thread(self.sync.kill)

    async def terminate(self) -> None:
        """Asks the process to end (SIGTERM to its group)."""
        await asyncio.to_thread(self.sync.terminate)

    async def resize(self, cols: int, rows: int) -> None:
        """Resizes the process's PTY."""
        await asyncio.to_thread(self.sync.resize, cols, rows)


__all__ = ["AsyncProcess", "AsyncStreamReader", "AsyncStdinWriter"]
