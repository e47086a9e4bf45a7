"""Corral's Python SDK: sandboxes for AI agents over the daemon's HTTP API.

    from corral import Sandbox
    sb = Sandbox.create(image="python:3.12")
    p = sb.exec("python3", "-c", "print(6*7)")
    print(p.stdout.read(), p.wait())

The daemon is found at ``CORRAL_URL`` (default http://127.0.0.1:7070) with
the token ``CORRAL_TOKEN`` (default: the token file, ``CORRAL_TOKEN_FILE``
or /var/lib/corral/token), as the CLI finds it. ``corral.aio`` is the same
SDK for asyncio code (``await AsyncSandbox.create(...)``, ``async for``).
"""

from ._http import Client
from .errors import (Conflict, ConnectionFailed, CorralError, InvalidArgument, NotFound, PermissionDenied,
                     ResourceExhausted, SandboxTimeout, Unavailable)
from .filesystem import FileEntry, Filesystem
from .image import BuildEvent, BuildResult, Image
from .ports import Tunnel
from .process import Process, StdinWriter, StreamReader
from .sandbox import Sandbox
from .secret import Secret
from .volume import Volume
from .watch import Watch, WatchEvent

__all__ = [
    "Client", "Sandbox", "Image", "BuildEvent", "BuildResult", "Tunnel", "Process", "StreamReader", "StdinWriter", "Filesystem", "FileEntry", "Watch", "WatchEvent",
    "Volume", "Secret",
    "CorralError", "NotFound", "InvalidArgument", "Conflict", "ResourceExhausted", "PermissionDenied",
    "Unavailable", "SandboxTimeout", "ConnectionFailed",
]
