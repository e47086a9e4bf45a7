"""sb.open(path, mode): file objects over the daemon's file API; and create's resource and network options."""

import hashlib
import io
import os
import unittest

from _daemon import NEEDS, corral, create, run


@NEEDS
class TestOpen(unittest.TestCase):
    sb: corral.Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sb = create(workdir="/root", cpu=(0.5, 1.0), memory=(256, 512), idle_timeout=900,
                        cidr_allowlist=["192.0.2.0/24"], domain_allowlist=["example.com"])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sb.terminate()

    def test_create_options_reach_the_sandbox(self) -> None:
        info = self.sb.refresh()
        self.assertEqual((info["cpu"], info["cpu_limit"]), (0.5, 1.0))
        self.assertEqual((info["memory_mb"], info["memory_limit_mb"]), (256, 512))
        self.assertEqual(info.get("idle_timeout"), 900)
        self.assertEqual(info["network"].get("cidr_allowlist"), ["192.0.2.0/24"])
        self.assertEqual(info["network"].get("domain_allowlist"), ["example.com"])

    def test_write_then_read_text(self) -> None:
        f = self.sb.open("notes.txt", "w")
        f.write("line one\n")
        print("line two", file=f)
        self.assertFalse(self.sb.filesystem.exists("notes.txt"))  # sent on close
        f.close()
        self.assertEqual(run(self.sb, "cat", "/root/notes.txt"), "line one\nline two\n")
        with self.sb.open("notes.txt") as f:
            self.assertEqual(f.readline(), "line one\n")
            self.assertEqual(list(f), ["line two\n"])
        with self.sb.open("notes.txt", "r") as f:
            self.assertEqual(f.read(), "line one\nline two\n")

    def test_append_and_exclusive(self) -> None:
        with self.sb.open("log.txt", "a") as f:  # a missing file is created
            f.write("1\n")
        with self.sb.open("log.txt", "a") as f:
            f.write("2\n")
        with self.sb.open("log.txt", "ab") as f:
            f.seek(0)
            f.write(b"3\n")  # append mode writes at the end wherever the position is
        self.assertEqual(self.sb.filesystem.read_text("log.txt"), "1\n2\n3\n")
        with self.assertRaises(corral.Conflict):
            self.sb.open("log.txt", "x")
        with self.sb.open("fresh.txt", "x") as f:
            f.write("new")
        self.assertEqual(self.sb.filesystem.read_text("fresh.txt"), "new")

    def test_binary_read_and_seek(self) -> None:
        data = bytes(range(256)) * 16
        with self.sb.open("/root/data.bin", "wb") as f:
            self.assertEqual(f.write(data), len(data))
        with self.sb.open("/root/data.bin", "rb") as f:
            self.assertEqual(f.read(10), data[:10])
            self.assertEqual(f.tell(), 10)
            f.seek(1000)
            self.assertEqual(f.read(4), data[1000:1004])
            f.seek(5)  # backwards: the file is opened again
            self.assertEqual(f.read(3), data[5:8])
            f.seek(-6, io.SEEK_END)
            self.assertEqual(f.read(), data[-6:])
            f.seek(2, io.SEEK_SET)
            f.seek(2, io.SEEK_CUR)
            self.assertEqual(f.read(1), data[4:5])

    def test_read_write_plus(self) -> None:
        self.sb.filesystem.write_bytes("plus.bin", b"hello world")
        with self.sb.open("plus.bin", "r+b") as f:
            self.assertEqual(f.read(5), b"hello")
            f.seek(6)
            f.write(b"WORLD")
            f.seek(0)
            self.assertEqual(f.read(), b"hello WORLD")
        self.assertEqual(self.sb.filesystem.read_bytes("plus.bin"), b"hello WORLD")
        with self.sb.open("plus.bin", "w+") as f:  # truncates
            f.write("short")
            f.seek(0)
            self.assertEqual(f.read(), "short")
        self.assertEqual(self.sb.filesystem.read_text("plus.bin"), "short")

    def test_large_write_spools_to_disk(self) -> None:
        data = os.urandom(1 << 20) * 9  # past the 8 MiB kept in memory
        with self.sb.open("big.bin", "wb") as f:
            for i in range(0, len(data), 1 << 20):
                f.write(data[i:i + (1 << 20)])
        out = run(self.sb, "sha256sum", "/root/big.bin")
        self.assertEqual(out.split()[0], hashlib.sha256(data).hexdigest())
        h = hashlib.sha256()
        with self.sb.open("big.bin", "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                h.update(b)
        self.assertEqual(h.hexdigest(), hashlib.sha256(data).hexdigest())

    def test_errors(self) -> None:
        with self.assertRaises(corral.NotFound):
            self.sb.open("/root/missing.txt")
        with self.assertRaises(corral.NotFound):
            self.sb.open("/root/missing.txt", "r+")
        for mode in ("", "rw", "q", "rbt", "rr"):
            with self.assertRaises(corral.InvalidArgument):
                self.sb.open("x", mode)
        with self.assertRaises(corral.InvalidArgument):
            self.sb.open("x", "rb", encoding="utf-8")
        with self.sb.open("notes2.txt", "w") as f:
            with self.assertRaises(io.UnsupportedOperation):
                f.read()


if __name__ == "__main__":
    unittest.main()
