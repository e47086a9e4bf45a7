"""A PEP 517 build backend in the standard library alone, so ``pip install ./sdk/python``
works offline (no setuptools to fetch). It builds a pure-Python wheel of the ``corral`` package
(and an sdist of this folder)."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile
from typing import Any, Dict, List, Optional, Tuple

NAME = "corral"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "py3-none-any"


def _metadata() -> str:
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Python SDK for Corral, a self-hosted sandbox platform for AI agents\n"
            "Requires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n%s" % (NAME, VERSION, readme))


def _package_files() -> List[Tuple[str, bytes]]:
    out = []
    pkg = os.path.join(HERE, NAME)
    for fn in sorted(os.listdir(pkg)):
        if fn.endswith(".py") or fn == "py.typed":
            with open(os.path.join(pkg, fn), "rb") as f:
                out.append(("%s/%s" % (NAME, fn), f.read()))
    return out


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _wheel(wheel_directory: str, files: List[Tuple[str, bytes]]) -> str:
    dist = "%s-%s.dist-info" % (NAME, VERSION)
    files = files + [
        (dist + "/METADATA", _metadata().encode()),
        (dist + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: corral-_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG).encode()),
    ]
    record = "\n".join(_record_line(p, d) for p, d in files) + "\n%s/RECORD,,\n" % dist
    name = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files + [(dist + "/RECORD", record.encode())]:
            z.writestr(p, d)
    return name


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    """Builds the wheel into ``wheel_directory``; returns its file name."""
    return _wheel(wheel_directory, _package_files())


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """Builds an editable wheel: a .pth file pointing at this folder."""
    return _wheel(wheel_directory, [("%s.pth" % NAME, (HERE + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """Builds a source archive of this folder (package, tests, backend, metadata)."""
    base = "%s-%s" % (NAME, VERSION)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for fn in ("pyproject.toml", "README.md", "_build.py", NAME, "tests"):
            t.add(os.path.join(HERE, fn), arcname="%s/%s" % (base, fn),
                  filter=lambda ti: None if "__pycache__" in ti.name else ti)
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    """Nothing: the backend needs only the standard library."""
    return []


get_requires_for_build_sdist = get_requires_for_build_wheel
get_requires_for_build_editable = get_requires_for_build_wheel
