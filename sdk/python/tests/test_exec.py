"""Sandbox.create/from_id/from_name/list, exec with streaming, stdin, PTY, kill, tags, timeout."""

import time
import unittest
import uuid

from _daemon import corral
from _daemon import NEEDS, create, run


@NEEDS
class TestExec(unittest.TestCase):
    sb: corral.Sandbox
    name: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.name = "py-exec-" + uuid.uuid4().hex[:8]
        cls.sb = create(name=cls.name, tags={"case": cls.name}, env={"FROM_CREATE": "yes"})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sb.terminate()

    def test_find(self) -> None:
        self.assertEqual(corral.Sandbox.from_id(self.sb.object_id).object_id, self.sb.object_id)
        self.assertEqual(corral.Sandbox.from_name(self.name).object_id, self.sb.object_id)
        found = corral.Sandbox.list(tags={"case": self.name})
        self.assertEqual([s.object_id for s in found], [self.sb.object_id])
        self.assertEqual(corral.Sandbox.list(tags={"case": "nobody-has-this"}), [])
        self.assertEqual(self.sb.state, "running")

    def test_exec_output_and_exit(self) -> None:
        p = self.sb.exec("sh", "-c", "echo out1; echo err1 >&2; echo out2; exit 7", stdin=False)
        self.assertEqual(list(p.stdout), ["out1\n", "out2\n"])
        self.assertEqual(p.stderr.read(), "err1\n")
        self.assertEqual(p.wait(), 7)
        self.assertEqual(p.returncode, 7)
        self.assertEqual(p.poll(), 7)

    def test_exec_options(self) -> None:
        out = run(self.sb, "sh", "-c", "pwd; echo $FOO $FROM_CREATE; id -u", workdir="/tmp", env={"FOO": "bar"},
                  user="nobody")
        self.assertEqual(out.split("\n")[:3], ["/tmp", "bar yes", "65534"])

    def test_streaming_and_stdin(self) -> None:
        p = self.sb.exec("sh", "-c", "echo first; read x; echo got $x; cat; echo done")
        lines = iter(p.stdout)
        self.assertEqual(next(lines), "first\n")  # seen before the process ends
        self.assertIsNone(p.poll())
        p.stdin.write("hello\n")
        self.assertEqual(next(lines), "got hello\n")
        p.stdin.write(b"line two\n")
        self.assertEqual(next(lines), "line two\n")
        p.stdin.write_eof()
        self.assertEqual(list(lines), ["done\n"])
        self.assertEqual(p.wait(timeout=120), 0)

    def test_bytes_output(self) -> None:
        p = self.sb.exec("sh", "-c", "printf 'a\\000b\\377'", stdin=False)
        self.assertEqual(b"".join(p.stdout.iter_bytes()), b"a\x00b\xff")
        self.assertEqual(p.wait(), 0)

    def test_pty(self) -> None:
        p = self.sb.exec("sh", "-c", "test -t 0 && test -t 1 && echo is-a-tty; stty size", pty=(100, 30), stdin=False)
        out = p.stdout.read()
        self.assertEqual(p.wait(), 0, out)
        self.assertIn("is-a-tty", out)
        self.assertIn("30 100", out)

    def test_kill(self) -> None:
        p = self.sb.exec("sleep", "1000", stdin=False)
        self.assertIsNone(p.poll())
        p.kill()
        code = p.wait(timeout=120)
        self.assertNotEqual(code, 0)
        self.assertIn("KILL", p.signal or "")

    def test_exec_timeout(self) -> None:
        p = self.sb.exec("sleep", "1000", timeout=1, stdin=False)
        p.wait(timeout=120)
        self.assertTrue(p.timed_out)

    def test_wait_timeout_raises(self) -> None:
        p = self.sb.exec("sleep", "1000", stdin=False)
        with self.assertRaises(corral.SandboxTimeout):
            p.wait(timeout=0.5)
        p.kill()
        p.wait(timeout=120)

    def test_set_tags_and_timeout(self) -> None:
        self.sb.set_tags({"extra": "1"})
        self.assertEqual(self.sb.refresh()["tags"].get("extra"), "1")
        self.sb.set_tags({"extra": None})
        self.assertNotIn("extra", self.sb.refresh()["tags"])
        before = self.sb.refresh()["expires_at"]
        self.sb.set_timeout(1800)
        self.assertGreater(self.sb.refresh()["expires_at"], before)

    def test_errors_on_exec(self) -> None:
        with self.assertRaises(corral.InvalidArgument):
            self.sb.exec()
        with self.assertRaises(corral.InvalidArgument):
            self.sb.exec("sh", timeout=-1)
        with self.assertRaises(corral.NotFound):
            corral.Sandbox(corral.Client(), {"id": "sb-gone"}).exec("true")


@NEEDS
class TestSandboxLifetime(unittest.TestCase):
    def test_entrypoint_wait_poll(self) -> None:
        sb = create()
        try:
            p = sb.exec("true", stdin=False)
            self.assertEqual(p.wait(), 0)
        finally:
            sb.terminate()
        ep = corral.Sandbox.create("sh", "-c", "exit 3", timeout=600, tags={"suite": "python-sdk"})
        self.assertEqual(ep.wait(), 3)
        deadline = time.monotonic() + 60
        while ep.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(ep.poll(), 3)
        ep.terminate()

    def test_context_manager_terminates(self) -> None:
        with create() as sb:
            run(sb, "true")
        with self.assertRaises(corral.CorralError):
            sb.exec("true")


if __name__ == "__main__":
    unittest.main()
