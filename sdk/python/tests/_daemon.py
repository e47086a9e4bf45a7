"""Shared by the tests: they run against the daemon CORRAL_URL names, or skip."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import corral  # noqa: E402

NEEDS = unittest.skipUnless(os.environ.get("CORRAL_URL") and os.environ.get("CORRAL_TOKEN"),
                            "needs a daemon: CORRAL_URL and CORRAL_TOKEN (TestPythonSDK in test/e2e sets them)")
TAG = {"suite": "python-sdk"}


def create(**kw: object) -> corral.Sandbox:
    """A gVisor sandbox tagged for the suite, with a lifetime that outlasts a slow run."""
    kw.setdefault("timeout", 1200)
    tags = dict(TAG)
    tags.update(kw.pop("tags", {}) or {})  # type: ignore[arg-type]
    return corral.Sandbox.create(tags=tags, **kw)  # type: ignore[arg-type]


def run(sb: corral.Sandbox, *cmd: str, **kw: object) -> str:
    """Runs cmd to its end and returns its stdout; fails on a non-zero exit."""
    p = sb.exec(*cmd, stdin=False, **kw)  # type: ignore[arg-type]
    out, err = p.stdout.read(), p.stderr.read()
    code = p.wait()
    if code != 0:
        raise AssertionError("%s exited %d: %s %s" % (cmd, code, out, err))
    return out
