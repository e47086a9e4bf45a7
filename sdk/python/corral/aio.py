"""The asyncio face of the SDK: the same sandboxes, awaited.

    from corral.aio import AsyncSandbox
    async with await AsyncSandbox.create(timeout=600) as sb:
        p = await sb.exec("sh", "-c", "echo one; sleep 1; echo two")
        async for line in p.stdout:
            print(line, end="")
        print(await p.wait())

It is built over the synchronous SDK: calls run in the default executor
(``asyncio.to_thread``), bounded as the synchronous calls are (a dead daemon
is ``ConnectionFailed`` within ``Client(connect_timeout=)``); process output,
process exits and ``AsyncSandbox.wait`` are awaited without holding a
thread, so cancelling them is immediate and loses no output. Each async
object's ``sync`` attribute is the synchronous one it wraps.
"""

import asyncio
from typing import IO, Any, AsyncIterator, Dict, Iterator, List, Mapping, Optional, Sequence

from ._aio_process import AsyncProcess, AsyncStdinWriter, AsyncStreamReader
from ._http import Client
from .errors import SandboxTimeout
from .filesystem import FileEntry, Filesystem
from .image import BuildResult, Image, Progress
from .ports import Tunnel
from .sandbox import Sandbox, _path
from .secret import Secret
from .volume import Volume
from .watch import Watch, WatchEvent

WAIT_ROUND = 10.0


class AsyncSandbox:
    """A sandbox for asyncio code; the methods are those of ``Sandbox``, awaited."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sync = sandbox
        self.filesystem = AsyncFilesystem(sandbox.filesystem)

    @property
    def object_id(self) -> str:
        """The sandbox's id."""
        return self.sync.object_id

    @property
    def id(self) -> str:
        """The sandbox's id."""
        return self.sync.object_id

    @property
    def name(self) -> Optional[str]:
        """The sandbox's name, if it has one."""
        return self.sync.name

    @property
    def tags(self) -> Dict[str, str]:
        """The sandbox's tags as last reported."""
        return self.sync.tags

    @property
    def info(self) -> Dict[str, Any]:
        """What the daemon last reported about the sandbox."""
        return self.sync.info

    def __repr__(self) -> str:
        return "AsyncSandbox(%s)" % self.sync.object_id

    @classmethod
    async def create(cls, *cmd: str, **kwargs: Any) -> "AsyncSandbox":
        """``Sandbox.create``, awaited (an ``Image`` is built first, in a thread)."""
        return cls(await asyncio.to_thread(Sandbox.create, *cmd, **kwargs))

    @classmethod
    async def from_id(cls, sandbox_id: str, client: Optional[Client] = None) -> "AsyncSandbox":
        """The sandbox with this id (raises ``NotFound``)."""
        return cls(await asyncio.to_thread(Sandbox.from_id, sandbox_id, client))

    @classmethod
    async def from_name(cls, name: str, client: Optional[Client] = None) -> "AsyncSandbox":
        """The live sandbox with this name (raises ``NotFound``)."""
        return cls(await asyncio.to_thread(Sandbox.from_name, name, client))

    @classmethod
    async def list(cls, tags: Optional[Mapping[str, str]] = None, states: Optional[Sequence[str]] = None,
                   client: Optional[Client] = None) -> "List[AsyncSandbox]":
        """Sandboxes carrying all of ``tags`` (and in one of ``states``), oldest first."""
        found = await asyncio.to_thread(Sandbox.list, tags, states, client)
        return [cls(s) for s in found]

    async def refresh(self) -> Dict[str, Any]:
        """Fetches what the daemon reports about the sandbox now."""
        return await asyncio.to_thread(self.sync.refresh)

    async def get_state(self) -> str:
        """The sandbox's state now ("running", "paused", "stopped", ...)."""
        return str((await self.refresh()).get("state", ""))

    async def exec(self, *args: str, **kwargs: Any) -> AsyncProcess:
        """``Sandbox.exec``, awaited: the process once it runs."""
        return AsyncProcess(await asyncio.to_thread(self.sync.exec, *args, **kwargs))

    async def wait(self, timeout: Optional[float] = None) -> int:
        """Waits for the sandbox's end and returns its exit code.

        ``timeout`` seconds passing first raise ``SandboxTimeout``. The daemon is
        asked in rounds of at most 10 s, so a cancelled wait leaves no call behind
        for longer than that.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        path = _path(self.object_id, "/wait")
        while True:
            left = WAIT_ROUND if deadline is None else min(WAIT_ROUND, deadline - loop.time())
            if left <= 0:
                raise SandboxTimeout("sandbox %s still running after %s s" % (self.object_id, timeout),
                                     "deadline_exceeded")
            try:
                res = await asyncio.to_thread(self.sync._client.call, "POST", path, {"timeout": left}, None, True)
            except SandboxTimeout:
                continue
            return int((res or {}).get("exit_code", -1))

    async def poll(self) -> Optional[int]:
        """The sandbox's exit code once it ended, else None."""
        return await asyncio.to_thread(self.sync.poll)

    async def terminate(self) -> None:
        """Ends the sandbox and removes it."""
        await asyncio.to_thread(self.sync.terminate)

    async def set_tags(self, tags: Mapping[str, Optional[str]]) -> None:
        """Merges ``tags`` into the sandbox's (a None value removes that tag)."""
        await asyncio.to_thread(self.sync.set_tags, tags)

    async def set_timeout(self, timeout: float, extend_only: bool = False) -> None:
        """Ends the sandbox ``timeout`` seconds from now (``extend_only``: never earlier)."""
        await asyncio.to_thread(self.sync.set_timeout, timeout, extend_only)

    async def pause(self) -> None:
        """Freezes the sandbox."""
        await asyncio.to_thread(self.sync.pause)

    async def resume(self) -> None:
        """Thaws a paused sandbox."""
        await asyncio.to_thread(self.sync.resume)

    async def snapshot(self, name: Optional[str] = None) -> Dict[str, Any]:
        """Saves a memory snapshot; start copies with ``from_snapshot``."""
        return await asyncio.to_thread(self.sync.snapshot, name)

    async def snapshot_filesystem(self, tag: str) -> Dict[str, Any]:
        """Saves the sandbox's files as an image tagged ``tag``."""
        return await asyncio.to_thread(self.sync.snapshot_filesystem, tag)

    async def fork(self, n: int = 1) -> "List[AsyncSandbox]":
        """Starts ``n`` running copies of the sandbox."""
        return [AsyncSandbox(s) for s in await asyncio.to_thread(self.sync.fork, n)]

    async def tunnels(self) -> Dict[int, Tunnel]:
        """The sandbox's exposed ports, by port, each with its URL."""
        return await asyncio.to_thread(self.sync.tunnels)

    async def tunnel(self, port: int) -> Tunnel:
        """The exposed port ``port`` (``NotFound`` if not exposed)."""
        return await asyncio.to_thread(self.sync.tunnel, port)

    async def open(self, path: str, mode: str = "r", **kwargs: Any) -> "AsyncFile":
        """``Sandbox.open``, awaited: a file object whose methods are awaited."""
        return AsyncFile(await asyncio.to_thread(self.sync.open, path, mode, **kwargs))

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.terminate()
        except Exception:
            pass


class AsyncFile:
    """A file in a sandbox for asyncio code (``await sb.open(...)``); ``sync`` is the file object."""

    def __init__(self, f: IO[Any]) -> None:
        self.sync = f

    async def read(self, n: int = -1) -> Any:
        """Reads up to ``n`` bytes or characters (all that is left when -1)."""
        return await asyncio.to_thread(self.sync.read, n)

    async def readline(self) -> Any:
        """Reads one line."""
        return await asyncio.to_thread(self.sync.readline)

    async def write(self, data: Any) -> int:
        """Writes ``data`` (sent to the sandbox on close)."""
        return await asyncio.to_thread(self.sync.write, data)

    async def seek(self, offset: int, whence: int = 0) -> int:
        """Moves the position."""
        return await asyncio.to_thread(self.sync.seek, offset, whence)

    async def tell(self) -> int:
        """The position."""
        return await asyncio.to_thread(self.sync.tell)

    async def close(self) -> None:
        """Closes the file (a written file is sent to the sandbox now)."""
        await asyncio.to_thread(self.sync.close)

    async def __aiter__(self) -> AsyncIterator[Any]:
        """Yields lines."""
        while True:
            line = await self.readline()
            if not line:
                return
            yield line

    async def __aenter__(self) -> "AsyncFile":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncFilesystem:
    """``sb.filesystem`` for asyncio code: the methods of ``Filesystem``, awaited."""

    def __init__(self, fs: Filesystem) -> None:
        self.sync = fs

    async def read_bytes(self, path: str, user: Optional[str] = None) -> bytes:
        """A file's contents."""
        return await asyncio.to_thread(self.sync.read_bytes, path, user)

    async def read_text(self, path: str, encoding: str = "utf-8", user: Optional[str] = None) -> str:
        """A file's contents as text."""
        return await asyncio.to_thread(self.sync.read_text, path, encoding, user)

    async def write_bytes(self, path: str, data: bytes, mode: Optional[int] = None,
                          user: Optional[str] = None) -> FileEntry:
        """Writes ``data`` to a file."""
        return await asyncio.to_thread(self.sync.write_bytes, path, data, mode, user)

    async def write_text(self, path: str, text: str, encoding: str = "utf-8", mode: Optional[int] = None,
                         user: Optional[str] = None) -> FileEntry:
        """Writes ``text`` to a file."""
        return await asyncio.to_thread(self.sync.write_text, path, text, encoding, mode, user)

    async def copy_from_local(self, local_path: Any, remote_path: str, mode: Optional[int] = None,
                              user: Optional[str] = None) -> FileEntry:
        """Uploads a local file, streamed."""
        return await asyncio.to_thread(self.sync.copy_from_local, local_path, remote_path, mode, user)

    async def copy_to_local(self, remote_path: str, local_path: Any, user: Optional[str] = None) -> int:
        """Downloads a file, streamed; returns its size."""
        return await asyncio.to_thread(self.sync.copy_to_local, remote_path, local_path, user)

    async def list_files(self, path: str = ".", depth: int = 1, user: Optional[str] = None) -> List[FileEntry]:
        """The entries of a directory."""
        return await asyncio.to_thread(self.sync.list_files, path, depth, user)

    async def stat(self, path: str, user: Optional[str] = None) -> FileEntry:
        """Describes a path (``NotFound`` if missing)."""
        return await asyncio.to_thread(self.sync.stat, path, user)

    async def exists(self, path: str, user: Optional[str] = None) -> bool:
        """Whether a path exists."""
        return await asyncio.to_thread(self.sync.exists, path, user)

    async def make_directory(self, path: str, user: Optional[str] = None) -> FileEntry:
        """Creates a directory and its missing parents."""
        return await asyncio.to_thread(self.sync.make_directory, path, user)

    async def remove(self, path: str, recursive: bool = False, user: Optional[str] = None) -> None:
        """Removes a file or directory."""
        await asyncio.to_thread(self.sync.remove, path, recursive, user)

    async def rename(self, src: str, dst: str, user: Optional[str] = None) -> FileEntry:
        """Moves a path."""
        return await asyncio.to_thread(self.sync.rename, src, dst, user)

    async def watch(self, path: str = ".", recursive: bool = False, user: Optional[str] = None) -> "AsyncWatch":
        """Watches a directory: ``async for ev in w``; ``close()`` it when done."""
        return AsyncWatch(await asyncio.to_thread(self.sync.watch, path, recursive, user))


class AsyncWatch:
    """A directory watch for asyncio code; ``close()`` ends the iteration."""

    def __init__(self, w: Watch) -> None:
        self.sync = w
        self._it = iter(w)

    async def __aiter__(self) -> AsyncIterator[WatchEvent]:
        """Yields changes as they happen."""
        while True:
            ev = await asyncio.to_thread(_next_or_none, self._it)
            if ev is None:
                return
            yield ev

    def close(self) -> None:
        """Stops the watch."""
        self.sync.close()

    async def __aenter__(self) -> "AsyncWatch":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


class AsyncVolume:
    """A named volume for asyncio code: the methods of ``Volume``, awaited; ``sync`` is the ``Volume``.

    Mount it with ``AsyncSandbox.create(volumes={"/data": vol.sync})`` (or its name).
    """

    def __init__(self, volume: Volume) -> None:
        self.sync = volume

    @property
    def name(self) -> str:
        """The volume's name."""
        return self.sync.name

    def __repr__(self) -> str:
        return "AsyncVolume(%s)" % self.sync.name

    @classmethod
    async def create(cls, name: str, size_gib: Optional[int] = None, client: Optional[Client] = None) -> "AsyncVolume":
        """``Volume.create``, awaited."""
        return cls(await asyncio.to_thread(Volume.create, name, size_gib, client))

    @classmethod
    async def from_name(cls, name: str, create_if_missing: bool = False, size_gib: Optional[int] = None,
                        client: Optional[Client] = None) -> "AsyncVolume":
        """``Volume.from_name``, awaited."""
        return cls(await asyncio.to_thread(Volume.from_name, name, create_if_missing, size_gib, client))

    @classmethod
    async def list(cls, client: Optional[Client] = None) -> "List[AsyncVolume]":
        """Every volume."""
        return [cls(v) for v in await asyncio.to_thread(Volume.list, client)]

    def mount(self, path: str, read_only: bool = False) -> Dict[str, Any]:
        """A mount of this volume at ``path``, for ``create(volumes=[...])``."""
        return self.sync.mount(path, read_only)

    async def refresh(self) -> Dict[str, Any]:
        """What the daemon reports about the volume now."""
        return await asyncio.to_thread(self.sync.refresh)

    async def remove(self, force: bool = False) -> None:
        """Deletes the volume (``force``: terminating the sandboxes that mount it first)."""
        await asyncio.to_thread(self.sync.remove, force)

    async def read_bytes(self, path: str) -> bytes:
        """A file's contents."""
        return await asyncio.to_thread(self.sync.read_bytes, path)

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """A file's contents as text."""
        return await asyncio.to_thread(self.sync.read_text, path, encoding)

    async def write_bytes(self, path: str, data: bytes, mode: Optional[int] = None) -> FileEntry:
        """Writes ``data`` to a file of the volume."""
        return await asyncio.to_thread(self.sync.write_bytes, path, data, mode)

    async def write_text(self, path: str, text: str, encoding: str = "utf-8", mode: Optional[int] = None) -> FileEntry:
        """Writes ``text`` to a file of the volume."""
        return await asyncio.to_thread(self.sync.write_text, path, text, encoding, mode)

    async def list_files(self, path: str = "/") -> List[FileEntry]:
        """The entries of a directory of the volume."""
        return await asyncio.to_thread(self.sync.list_files, path)


class AsyncSecret:
    """A stored secret for asyncio code: the methods of ``Secret``, awaited; ``sync`` is the ``Secret``."""

    def __init__(self, secret: Secret) -> None:
        self.sync = secret

    @property
    def name(self) -> str:
        """The secret's name."""
        return self.sync.name

    @property
    def keys(self) -> List[str]:
        """Its keys (never values)."""
        return self.sync.keys

    def __repr__(self) -> str:
        return "AsyncSecret(%s)" % self.sync.name

    @classmethod
    async def create(cls, name: str, values: Mapping[str, str], client: Optional[Client] = None) -> "AsyncSecret":
        """``Secret.create``, awaited."""
        return cls(await asyncio.to_thread(Secret.create, name, values, client))

    @classmethod
    async def from_name(cls, name: str, client: Optional[Client] = None) -> "AsyncSecret":
        """``Secret.from_name``, awaited."""
        return cls(await asyncio.to_thread(Secret.from_name, name, client))

    @classmethod
    async def list(cls, client: Optional[Client] = None) -> "List[AsyncSecret]":
        """Every secret's name and keys."""
        return [cls(s) for s in await asyncio.to_thread(Secret.list, client)]

    def header(self, key: str, host: str, header: str = "Authorization",
               template: Optional[str] = None) -> Dict[str, str]:
        """An egress header rule (``Secret.header``)."""
        return self.sync.header(key, host, header, template)

    async def rotate(self, values: Mapping[str, str]) -> None:
        """Replaces all its values."""
        await asyncio.to_thread(self.sync.rotate, values)

    async def remove(self) -> None:
        """Deletes the secret."""
        await asyncio.to_thread(self.sync.remove)


def _next_or_none(it: Iterator[WatchEvent]) -> Optional[WatchEvent]:
    return next(it, None)


async def build_image(image: Image, client: Optional[Client] = None, tag: Optional[str] = None,
                      no_cache: bool = False, progress: Optional[Progress] = None) -> BuildResult:
    """``Image.build``, awaited (``progress`` is called from the building thread)."""
    return await asyncio.to_thread(image.build, client, tag, no_cache, progress)


__all__ = ["AsyncSandbox", "AsyncProcess", "AsyncStreamReader", "AsyncStdinWriter", "AsyncFilesystem",
           "AsyncFile", "AsyncWatch", "AsyncVolume", "AsyncSecret", "build_image"]
