"""Sandbox: create, find, list, run processes in, snapshot, fork and end sandboxes."""

from typing import IO, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote

from ._http import Client
from .errors import InvalidArgument, NotFound
from .files import open_file
from .filesystem import Filesystem
from .image import Image
from .ports import Tunnel, tunnels
from .process import Process, args_list, start
from .secret import Secret, secret_names
from .volume import VolumeSpec, volume_mounts

Resource = Union[float, int, Tuple[float, float]]


def _path(sandbox_id: str, rest: str = "") -> str:
    return "/v1/sandboxes/" + quote(sandbox_id, safe="") + rest


def _split(value: Optional[Resource], name: str) -> Tuple[Optional[float], Optional[float]]:
    if value is None:
        return None, None
    if isinstance(value, tuple):
        if len(value) != 2:
            raise InvalidArgument("%s: a number or a (request, limit) pair" % name, "invalid_argument")
        return float(value[0]), float(value[1])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument("%s: a number or a (request, limit) pair, not %s" % (name, type(value).__name__),
                              "invalid_argument")
    return float(value), None


def _port(p: Any) -> Dict[str, Any]:
    if isinstance(p, Mapping):
        out = {"port": _port(p.get("port"))["port"]}
        if p.get("public"):
            out["public"] = True
        return out
    if isinstance(p, bool) or not isinstance(p, int):
        raise InvalidArgument("expose: ports are int (or {\"port\": n, \"public\": bool}), not %r" % (p,),
                              "invalid_argument")
    return {"port": p}


class Sandbox:
    """A Corral sandbox: a gVisor container or a QEMU virtual machine.

    Make one with ``Sandbox.create``; find one with ``from_id``, ``from_name``
    or ``list``. ``info`` holds what the daemon last reported about it.
    """

    def __init__(self, client: Client, info: Dict[str, Any]) -> None:
        self._client = client
        self.info = info
        self.object_id: str = info["id"]
        self.filesystem = Filesystem(client, self.object_id)

    @property
    def id(self) -> str:
        """The sandbox's id."""
        return self.object_id

    @property
    def name(self) -> Optional[str]:
        """The sandbox's name, if it has one."""
        return self.info.get("name") or None

    @property
    def tags(self) -> Dict[str, str]:
        """The sandbox's tags as last reported."""
        return dict(self.info.get("tags") or {})

    def __repr__(self) -> str:
        return "Sandbox(%s)" % self.object_id

    @classmethod
    def create(cls, *cmd: str, image: Union[str, Image, None] = None, runtime: Optional[str] = None,
               cpu: Optional[Resource] = None, memory: Optional[Resource] = None,
               timeout: Optional[float] = None, idle_timeout: Optional[float] = None,
               workdir: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
               user: Optional[str] = None, name: Optional[str] = None,
               tags: Optional[Mapping[str, str]] = None, block_network: bool = False,
               cidr_allowlist: Optional[Sequence[str]] = None,
               domain_allowlist: Optional[Sequence[str]] = None,
               expose: Optional[Sequence[Union[int, Mapping[str, Any]]]] = None, from_snapshot: Optional[str] = None,
               volumes: Optional[VolumeSpec] = None,
               secrets: Optional[Sequence[Union[str, Secret]]] = None,
               secret_headers: Optional[Sequence[Mapping[str, str]]] = None,
               client: Optional[Client] = None) -> "Sandbox":
        """Creates a sandbox and returns it once it runs.

        ``cmd`` is its entrypoint (none: it idles until its timeout); ``runtime``
        is "gvisor" or "vm"; ``cpu`` cores and ``memory`` MiB are a number or a
        (request, limit) pair; ``timeout`` and ``idle_timeout`` are seconds;
        ``volumes`` are named volumes to mount: ``{"/data": "myvol"}`` (a name or
        a ``Volume``), or a list of mounts such as ``vol.mount("/data",
        read_only=True)`` or ``{"name": "myvol", "path": "/data", "read_only": True}``.
        ``secrets`` are stored secrets (names or ``Secret``) given as env;
        ``secret_headers`` are egress header rules (``secret.header(...)`` or
        {"secret", "key", "host", "header", "template"}): the sandbox never holds them.
        ``image`` is an image name or an ``Image``, built first if this client
        has not built it (progress on the ``corral.image`` logger). ``expose``
        lists ports (an int, or {"port": n, "public": True}): see ``tunnel``.
        """
        cpu_req, cpu_lim = _split(cpu, "cpu")
        mem_req, mem_lim = _split(memory, "memory")
        body: Dict[str, Any] = {
            "runtime": runtime, "image": image if isinstance(image, str) else None, "cpu": cpu_req, "cpu_limit": cpu_lim,
            "memory_mb": None if mem_req is None else int(mem_req),
            "memory_limit_mb": None if mem_lim is None else int(mem_lim),
            "timeout": timeout, "idle_timeout": idle_timeout, "workdir": workdir, "user": user,
            "env": dict(env) if env else None, "name": name, "tags": dict(tags) if tags else None,
            "entrypoint": args_list(cmd) or None, "block_network": block_network or None,
            "cidr_allowlist": list(cidr_allowlist) if cidr_allowlist else None,
            "domain_allowlist": list(domain_allowlist) if domain_allowlist else None,
            "expose": [_port(p) for p in expose] if expose else None,
            "from_snapshot": from_snapshot,
            "volumes": volume_mounts(volumes),
            "secrets": secret_names(secrets),
            "secret_headers": [dict(h) for h in secret_headers] if secret_headers else None,
        }
        c = client or Client()
        if isinstance(image, Image):
            body["image"] = image.build(c).digest
        info = c.call("POST", "/v1/sandboxes", payload={k: v for k, v in body.items() if v is not None})
        return cls(c, info)

    @classmethod
    def from_id(cls, sandbox_id: str, client: Optional[Client] = None) -> "Sandbox":
        """The sandbox with this id (raises ``NotFound``)."""
        if not isinstance(sandbox_id, str) or not sandbox_id:
            raise InvalidArgument("sandbox id: a non-empty str", "invalid_argument")
        c = client or Client()
        return cls(c, c.call("GET", _path(sandbox_id)))

    @classmethod
    def from_name(cls, name: str, client: Optional[Client] = None) -> "Sandbox":
        """The live sandbox with this name (or the newest that had it; raises ``NotFound``)."""
        return cls.from_id(name, client)

    @classmethod
    def list(cls, tags: Optional[Mapping[str, str]] = None, states: Optional[Sequence[str]] = None,
             client: Optional[Client] = None) -> "List[Sandbox]":
        """Sandboxes carrying all of ``tags`` (and in one of ``states``), oldest first."""
        c = client or Client()
        q: Dict[str, Any] = {"limit": 500}
        if tags:
            q["tag"] = ["%s=%s" % (k, v) for k, v in tags.items()]
        if states:
            q["state"] = ",".join(states)
        out: List[Sandbox] = []
        while True:
            page = c.call("GET", "/v1/sandboxes", q) or {}
            out.extend(cls(c, s) for s in page.get("sandboxes") or [])
            if not page.get("next"):
                return out
            q["next"] = page["next"]

    def refresh(self) -> Dict[str, Any]:
        """Fetches what the daemon reports about the sandbox now."""
        self.info = self._client.call("GET", _path(self.object_id))
        return self.info

    @property
    def state(self) -> str:
        """The sandbox's state now ("running", "paused", "stopped", ...)."""
        return str(self.refresh().get("state", ""))

    def exec(self, *args: str, workdir: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
             user: Optional[str] = None, timeout: Optional[float] = None,
             pty: Union[bool, Tuple[int, int]] = False, stdin: bool = True,
             kill_tree: bool = False, secrets: Optional[Sequence[Union[str, Secret]]] = None) -> Process:
        """Starts ``args`` in the sandbox and returns the process as soon as it runs.

        ``pty`` is True (80x24) or (cols, rows); ``timeout`` kills it after that many seconds.
        ``stdin`` False gives it no stdin to read. ``secrets`` (names or
        ``Secret``) add stored secrets' values to its env.
        """
        cmd = args_list(args)
        if not cmd:
            raise InvalidArgument("exec: a command is required", "invalid_argument")
        req: Dict[str, Any] = {"cmd": cmd, "stdin": stdin}
        if workdir:
            req["cwd"] = workdir
        if env:
            req["env"] = dict(env)
        if user:
            req["user"] = user
        if timeout:
            req["timeout"] = timeout
        if kill_tree:
            req["kill_tree"] = True
        if secrets:
            req["secrets"] = secret_names(secrets)
        if pty:
            cols, rows = (80, 24) if pty is True else pty
            req["pty"] = {"cols": cols, "rows": rows}
        return start(self._client, self.object_id, req)

    def wait(self) -> int:
        """Waits for the sandbox's end and returns its exit code."""
        res = self._client.call("POST", _path(self.object_id, "/wait"), wait=True) or {}
        return int(res.get("exit_code", -1))

    def poll(self) -> Optional[int]:
        """The sandbox's exit code once it ended, else None."""
        info = self.refresh()
        if info.get("ended_at") is None:
            return None
        return int(info.get("exit_code", -1) if info.get("exit_code") is not None else -1)

    def terminate(self) -> None:
        """Ends the sandbox and removes it."""
        self._client.call("DELETE", _path(self.object_id))

    def set_tags(self, tags: Mapping[str, Optional[str]]) -> None:
        """Merges ``tags`` into the sandbox's (a None value removes that tag)."""
        self.info = self._client.call("PATCH", _path(self.object_id), payload={"tags": dict(tags)}) or self.info

    def set_timeout(self, timeout: float, extend_only: bool = False) -> None:
        """Ends the sandbox ``timeout`` seconds from now (``extend_only``: never earlier)."""
        body = {"timeout": timeout, "extend_only": extend_only}
        self.info = self._client.call("PATCH", _path(self.object_id), payload=body) or self.info

    def pause(self) -> None:
        """Freezes the sandbox (its processes and memory stay)."""
        self._client.call("POST", _path(self.object_id, "/pause"))

    def resume(self) -> None:
        """Thaws a paused sandbox."""
        self._client.call("POST", _path(self.object_id, "/resume"))

    def snapshot(self, name: Optional[str] = None) -> Dict[str, Any]:
        """Saves a memory snapshot (processes, memory, files); start copies with ``from_snapshot``."""
        res: Dict[str, Any] = self._client.call("POST", _path(self.object_id, "/snapshots/memory"),
                                                payload={"name": name} if name else {})
        return res

    def snapshot_filesystem(self, tag: str) -> Dict[str, Any]:
        """Saves the sandbox's files as an image tagged ``tag``; returns the image."""
        res: Dict[str, Any] = self._client.call("POST", _path(self.object_id, "/snapshots/fs"), payload={"tag": tag})
        return res

    def fork(self, n: int = 1) -> "List[Sandbox]":
        """Starts ``n`` (1-16) running copies of the sandbox."""
        out = self._client.call("POST", _path(self.object_id, "/fork"), payload={"count": n}) or {}
        return [Sandbox(self._client, s) for s in out.get("sandboxes") or []]

    def open(self, path: str, mode: str = "r", encoding: Optional[str] = None, errors: Optional[str] = None,
             newline: Optional[str] = None, user: Optional[str] = None) -> IO[Any]:
        """Opens a file in the sandbox as a file object, like ``open()``.

        Modes: "r", "w", "a", "x", with "b" (bytes) or text (UTF-8 unless
        ``encoding``), and "+" to read and write. Reading streams the file
        (seeking back opens it again); writing is kept locally (in memory up to
        8 MiB, then in a temporary file) and sent to the sandbox when the file
        is closed, replacing the file at once. Use it as a context manager.
        """
        return open_file(self.filesystem, path, mode, encoding, errors, newline, user)

    def tunnels(self) -> Dict[int, Tunnel]:
        """The sandbox's exposed ports (``expose=`` at create), by port, each with its URL."""
        return tunnels(self._client, self.refresh())

    def tunnel(self, port: int) -> Tunnel:
        """The exposed port ``port``: ``.url`` reaches it over HTTP, ``.connect()`` opens raw TCP.

        Raises ``NotFound`` when the sandbox does not expose it.
        """
        t = self.tunnels().get(int(port))
        if t is None:
            raise NotFound("port %d of sandbox %s is not exposed" % (int(port), self.object_id), "not_found", 404)
        return t

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.terminate()
        except Exception:
            pass
