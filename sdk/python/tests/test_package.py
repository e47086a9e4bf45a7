"""The package itself: installable offline, typed, every public name documented."""

import inspect
import os
import sys
import tempfile
import unittest
import zipfile

from _daemon import corral

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


class TestPackage(unittest.TestCase):
    def test_wheel_builds_offline_with_py_typed(self) -> None:
        sys.path.insert(0, HERE)
        try:
            import _build
        finally:
            sys.path.remove(HERE)
        self.assertEqual(_build.get_requires_for_build_wheel(), [])
        with tempfile.TemporaryDirectory() as d:
            name = _build.build_wheel(d)
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                self.assertIsNone(z.testzip())
        for want in ("corral/__init__.py", "corral/py.typed", "corral/sandbox.py", "corral/process.py",
                     "corral/filesystem.py", "corral/errors.py", "corral/_http.py", "corral/aio.py",
                     "corral/image.py", "corral/files.py", "corral/ports.py", "corral/_layer.py",
                     "corral/_aio_process.py", "corral/volume.py", "corral/secret.py",
                     "corral-0.1.0.dist-info/RECORD", "corral-0.1.0.dist-info/METADATA"):
            self.assertIn(want, names)

    def test_public_names_documented(self) -> None:
        import corral.aio
        missing = []
        names = [(corral, n) for n in corral.__all__] + [(corral.aio, n) for n in corral.aio.__all__]
        for mod, name in names:
            obj = getattr(mod, name)
            if not inspect.getdoc(obj):
                missing.append(name)
            if inspect.isclass(obj):
                for mname, m in vars(obj).items():
                    if mname.startswith("_"):
                        continue
                    if (inspect.isfunction(m) or isinstance(m, (classmethod, property))) and not inspect.getdoc(
                            m.__func__ if isinstance(m, classmethod) else m):
                        missing.append("%s.%s" % (name, mname))
        self.assertEqual(missing, [])


if __name__ == "__main__":
    unittest.main()
