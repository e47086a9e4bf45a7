"""Image: a builder for the spec ``corral image build`` reads, built by the daemon on first use."""

import base64
import copy
import json
import logging
import os
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ._http import Client
from ._layer import upload_dir
from .errors import CorralError, InvalidArgument, error_for

log = logging.getLogger("corral.image")


class BuildEvent:
    """One event of a build: ``type`` (step, output, done, error), ``step`` (0 is the
    base), ``steps``, ``name``, ``status`` (running, cached, done, failed), ``data``
    (output bytes), ``seconds``, ``layer``, ``image`` (on done), ``error``."""

    def __init__(self, raw: Dict[str, Any]) -> None:
        self.raw = raw
        self.type: str = raw.get("type", "")
        self.step: int = int(raw.get("step") or 0)
        self.steps: int = int(raw.get("steps") or 0)
        self.name: str = raw.get("name", "")
        self.status: str = raw.get("status", "")
        self.stream: str = raw.get("stream", "")
        self.data: bytes = base64.b64decode(raw.get("data") or "")
        self.seconds: float = float(raw.get("seconds") or 0)
        self.layer: str = raw.get("layer", "")
        self.image: Optional[Dict[str, Any]] = raw.get("image")
        self.error: Optional[Dict[str, Any]] = raw.get("error")

    def __repr__(self) -> str:
        return "BuildEvent(%s step=%d %s)" % (self.type, self.step, self.status or self.name)


class BuildResult:
    """What a build made: ``image`` (the daemon's record), ``digest``, its ``events``,
    and per step (0 is the base) whether it was ``cached`` or run (``ran``)."""

    def __init__(self, image: Dict[str, Any], events: List[BuildEvent]) -> None:
        self.image = image
        self.digest: str = image.get("digest", "")
        self.events = events
        final = {e.step: e.status for e in events if e.type == "step" and e.status in ("cached", "done")}
        self.cached: List[int] = sorted(s for s, st in final.items() if st == "cached")
        self.ran: List[int] = sorted(s for s, st in final.items() if st == "done")

    def __repr__(self) -> str:
        return "BuildResult(%s, cached=%s, ran=%s)" % (self.digest, self.cached, self.ran)


Progress = Callable[[BuildEvent], None]


class Image:
    """An image to build: a base and steps, the same spec as ``corral image build``.

    Each method returns a new Image with one more step, so a shared base can
    be extended in several ways::

        img = (Image.debian().apt_install("cowsay").pip_install("requests")
               .run_commands("echo hi > /hi").add_local_dir("./app", "/opt/app")
               .env({"MODE": "prod"}).workdir("/opt/app"))
        sb = Sandbox.create(image=img)   # built (or found cached) on first use

    The daemon caches each step as a layer keyed by its parent and its
    definition, so building the same spec again runs nothing.
    """

    def __init__(self, base: Dict[str, Any]) -> None:
        self._base = base
        self._steps: List[Dict[str, Any]] = []
        self._top: Dict[str, Any] = {}
        self._lock = threading.Lock()
        self._built: Dict[str, BuildResult] = {}

    def _with(self, step: Optional[Dict[str, Any]] = None, **top: Any) -> "Image":
        img = Image(copy.deepcopy(self._base))
        img._steps = copy.deepcopy(self._steps) + ([step] if step else [])
        img._top = dict(self._top, **top)
        return img

    @classmethod
    def debian(cls, suite: str = "bookworm", packages: Sequence[str] = ()) -> "Image":
        """The daemon's Debian base (``packages``: built with mmdebstrap instead)."""
        base: Dict[str, Any] = {"debian": _str(suite, "suite")}
        if packages:
            base["packages"] = _strs(packages, "packages")
        return cls(base)

    @classmethod
    def from_registry(cls, ref: str, insecure: bool = False) -> "Image":
        """A Corral image (name:tag, sha256:...) or, where there is none, a registry image to pull."""
        base: Dict[str, Any] = {"image": _str(ref, "ref")}
        if insecure:
            base["insecure"] = True
        return cls(base)

    from_name = from_registry

    def apt_install(self, *packages: str) -> "Image":
        """Installs Debian packages (as root)."""
        return self._with({"apt_install": _strs(packages, "apt_install", True)})

    def pip_install(self, *packages: str, index_url: Optional[str] = None,
                    extra_index_url: Sequence[str] = (), find_links: Sequence[str] = (),
                    no_index: bool = False) -> "Image":
        """Installs Python packages with ``python3 -m pip`` (``find_links``: paths in the image or URLs)."""
        step: Dict[str, Any] = {"packages": _strs(packages, "pip_install", True)}
        if index_url:
            step["index_url"] = _str(index_url, "index_url")
        if extra_index_url:
            step["extra_index_url"] = _strs(extra_index_url, "extra_index_url")
        if find_links:
            step["find_links"] = _strs(find_links, "find_links")
        if no_index:
            step["no_index"] = True
        return self._with({"pip_install": step})

    def npm_install(self, *packages: str, registry: Optional[str] = None) -> "Image":
        """Installs npm packages globally."""
        step: Dict[str, Any] = {"packages": _strs(packages, "npm_install", True)}
        if registry:
            step["registry"] = _str(registry, "registry")
        return self._with({"npm_install": step})

    def run_commands(self, *commands: str) -> "Image":
        """Runs shell commands, as one ``/bin/sh -ec`` script (one cached step)."""
        return self._with({"run": _strs(commands, "run_commands", True)})

    def add_local_dir(self, local_path: Union[str, "os.PathLike[str]"], remote_path: str) -> "Image":
        """Copies a local directory's contents to ``remote_path`` (absolute).

        It is sent as a layer tarred with owners and times dropped, so only a
        change of content, names or modes runs the step again.
        """
        return self._add_local(local_path, remote_path, want_dir=True)

    def add_local_file(self, local_path: Union[str, "os.PathLike[str]"], remote_path: str) -> "Image":
        """Copies a local file to ``remote_path`` (to ``remote_path/<name>`` if it ends in /)."""
        return self._add_local(local_path, remote_path, want_dir=False)

    def _add_local(self, local_path: Any, remote_path: str, want_dir: bool) -> "Image":
        src = os.fspath(local_path)
        if not isinstance(src, str) or not src:
            raise InvalidArgument("local path: a non-empty str", "invalid_argument")
        if want_dir != os.path.isdir(src):
            raise InvalidArgument("%s is not a %s" % (src, "directory" if want_dir else "file"), "invalid_argument")
        if not _str(remote_path, "remote_path").startswith("/"):
            raise InvalidArgument("remote_path %r: an absolute path" % remote_path, "invalid_argument")
        return self._with({"copy": {"src": os.path.abspath(src), "dst": remote_path}})

    def env(self, vars: Mapping[str, str]) -> "Image":
        """Sets environment variables for later steps and the image."""
        if not isinstance(vars, Mapping) or not vars:
            raise InvalidArgument("env: a non-empty mapping of str to str", "invalid_argument")
        return self._with({"env": {_str(k, "env name"): _str(v, "env value") for k, v in vars.items()}})

    def workdir(self, path: str) -> "Image":
        """Sets (and creates) the directory later steps and the image's processes run in."""
        return self._with({"workdir": _str(path, "workdir")})

    def user(self, name: str) -> "Image":
        """Sets who later run/pip/npm steps and the image's processes run as."""
        return self._with({"user": _str(name, "user")})

    def cmd(self, *args: str) -> "Image":
        """Sets the image's default command."""
        return self._with(cmd=_strs(args, "cmd", True))

    def resources(self, cpu: Optional[float] = None, memory_mb: Optional[int] = None,
                  step_timeout: Optional[float] = None) -> "Image":
        """Sizes each build step's sandbox (daemon defaults: 2 CPUs, 2048 MiB, 1800 s a step)."""
        top: Dict[str, Any] = {"cpu": cpu, "memory_mb": memory_mb, "step_timeout": step_timeout}
        return self._with(None, **{k: v for k, v in top.items() if v is not None})

    def spec(self) -> Dict[str, Any]:
        """The build spec as JSON data (copy steps without their layer until built)."""
        out: Dict[str, Any] = {"base": copy.deepcopy(self._base), "steps": copy.deepcopy(self._steps)}
        out.update(copy.deepcopy(self._top))
        return out

    def __repr__(self) -> str:
        return "Image(%s)" % json.dumps(self.spec(), sort_keys=True)

    def build(self, client: Optional[Client] = None, tag: Optional[str] = None, no_cache: bool = False,
              progress: Optional[Progress] = None, force: bool = False) -> BuildResult:
        """Builds the image on the daemon (uploading local files first) and returns the result.

        ``progress`` gets each BuildEvent as it comes (default: log lines on the
        ``corral.image`` logger). An Image built once through a daemon is not sent
        again (``force`` sends it anyway; the daemon's cache still applies).
        """
        c = client or Client()
        with self._lock:
            if not force and not no_cache and not tag and c.url in self._built:
                return self._built[c.url]
            res = _build(c, self.spec(), tag, no_cache, progress or _log_event)
            self._built[c.url] = res
            return res


def _build(c: Client, spec: Dict[str, Any], tag: Optional[str], no_cache: bool,
           progress: Progress) -> BuildResult:
    for i, st in enumerate(spec["steps"]):
        if "copy" in st:
            try:
                st["copy"]["layer"] = upload_dir(c, st["copy"]["src"], st["copy"]["dst"])
            except OSError as e:
                raise InvalidArgument("step %d (copy %s): %s" % (i + 1, st["copy"]["src"], e),
                                      "invalid_argument") from None
    body: Dict[str, Any] = {"spec": spec}
    if tag:
        body["tag"] = tag
    if no_cache:
        body["no_cache"] = True
    events: List[BuildEvent] = []
    with c.request("POST", "/v1/images/build", None, json.dumps(body).encode(), "application/json",
                   stream=True) as r:
        for raw in r.json_lines():
            ev = BuildEvent(raw)
            events.append(ev)
            progress(ev)
            if ev.type == "error":
                err = ev.error or {}
                raise error_for(str(err.get("code") or "internal"), "image build: %s" % err.get("message"), 0)
            if ev.type == "done":
                if not ev.image:
                    raise CorralError("image build: the daemon reported no image")
                return BuildResult(ev.image, events)
    raise CorralError("image build: the daemon's event stream ended before the build did", "unavailable")


def _log_event(ev: BuildEvent) -> None:
    label = "[base]" if ev.step == 0 else "[%d/%d]" % (ev.step, ev.steps) if ev.steps else "[%d]" % ev.step
    if ev.type == "step":
        what = {"running": "", "cached": ": CACHED", "done": ": done in %.1fs" % ev.seconds,
                "failed": ": FAILED"}.get(ev.status, ": " + ev.status)
        log.info("%s %s%s", label, ev.name, what)
    elif ev.type == "output":
        log.debug("%s %s", label, ev.data.decode("utf-8", "replace").rstrip("\n"))
    elif ev.type == "done" and ev.image:
        log.info("built %s", ev.image.get("digest"))


def _str(v: Any, what: str) -> str:
    if not isinstance(v, str) or not v:
        raise InvalidArgument("%s: a non-empty str, not %r" % (what, v), "invalid_argument")
    return v


def _strs(vs: Any, what: str, nonempty: bool = False) -> List[str]:
    if isinstance(vs, str):
        raise InvalidArgument("%s: a list of str, not one str" % what, "invalid_argument")
    out = [_str(v, what) for v in vs]
    if nonempty and not out:
        raise InvalidArgument("%s: at least one" % what, "invalid_argument")
    return out


__all__ = ["Image", "BuildEvent", "BuildResult"]
