"""sb.filesystem: read/write, copy (a 100 MB round trip in bounded memory), list, stat, mkdir, remove."""

import hashlib
import os
import resource
import tempfile
import threading
import unittest

from _daemon import corral
from _daemon import NEEDS, create, run

BIG = 100 * 1024 * 1024


def _sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


@NEEDS
class TestFiles(unittest.TestCase):
    sb: corral.Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sb = create(workdir="/tmp")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sb.terminate()

    def test_text_and_bytes(self) -> None:
        fs = self.sb.filesystem
        fs.write_text("/tmp/hello.txt", "héllo\n")
        self.assertEqual(fs.read_text("/tmp/hello.txt"), "héllo\n")
        self.assertEqual(run(self.sb, "cat", "/tmp/hello.txt"), "héllo\n")
        data = bytes(range(256)) * 10
        fs.write_bytes("rel/b.bin", data, mode=0o600)
        self.assertEqual(fs.read_bytes("/tmp/rel/b.bin"), data)
        st = fs.stat("rel/b.bin")
        self.assertEqual((st.size, st.permissions[-9:] if st.permissions else oct(st.mode & 0o777)),
                         (len(data), "rw-------") if st.permissions else (len(data), "0o600"))
        with self.assertRaises(TypeError):
            fs.write_bytes("/tmp/x", "not bytes")  # type: ignore[arg-type]

    def test_dirs(self) -> None:
        fs = self.sb.filesystem
        fs.make_directory("/tmp/d/e/f")
        self.assertTrue(fs.stat("/tmp/d/e/f").is_dir)
        fs.write_text("/tmp/d/one.txt", "1")
        names = sorted(e.name for e in fs.list_files("/tmp/d"))
        self.assertEqual(names, ["e", "one.txt"])
        deep = [e.path for e in fs.list_files("/tmp/d", depth=3)]
        self.assertIn("/tmp/d/e/f", deep)
        fs.rename("/tmp/d/one.txt", "/tmp/d/two.txt")
        self.assertTrue(fs.exists("/tmp/d/two.txt"))
        self.assertFalse(fs.exists("/tmp/d/one.txt"))
        with self.assertRaises(corral.CorralError):
            fs.remove("/tmp/d")  # not empty
        fs.remove("/tmp/d", recursive=True)
        self.assertFalse(fs.exists("/tmp/d"))

    def test_watch(self) -> None:
        fs = self.sb.filesystem
        fs.make_directory("/tmp/watched")
        with fs.watch("/tmp/watched", recursive=True) as w:
            self.assertEqual(w.path, "/tmp/watched")
            guard = threading.Timer(120, w.close)  # a missed event fails the test, never hangs it
            guard.start()
            self.addCleanup(guard.cancel)
            fs.write_text("/tmp/watched/new.txt", "x")
            seen = []
            for ev in w:
                seen.append((ev.type, ev.name))
                if ev.name == "new.txt" and ev.type in ("create", "write", "rename"):
                    break
        self.assertIn("new.txt", [n for _, n in seen], seen)

    def test_missing(self) -> None:
        with self.assertRaises(corral.NotFound):
            self.sb.filesystem.read_bytes("/no/such/file")
        with self.assertRaises(corral.NotFound):
            self.sb.filesystem.stat("/no/such/file")

    def test_100mb_round_trip(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            src, back = os.path.join(d, "src"), os.path.join(d, "back")
            with open(src, "wb") as f:
                block = os.urandom(1 << 20)
                for i in range(BIG >> 20):
                    f.write(hashlib.sha256(bytes([i % 256])).digest() + block[32:])
            before = _max_rss_mb()
            self.sb.filesystem.copy_from_local(src, "/tmp/big")
            inside = run(self.sb, "sha256sum", "/tmp/big").split()[0]
            self.assertEqual(inside, _sha(src))
            self.assertEqual(self.sb.filesystem.copy_to_local("/tmp/big", back), BIG)
            self.assertEqual(_sha(back), _sha(src))
            grew = _max_rss_mb() - before
            self.assertLess(grew, 40, "the round trip held %.0f MB in memory" % grew)


if __name__ == "__main__":
    unittest.main()
