"""Bad input gives a typed exception carrying the API's message, never a hang."""

import time
import unittest

from _daemon import corral
from _daemon import NEEDS


class TestErrorsOffline(unittest.TestCase):
    def test_dead_daemon_is_connection_failed(self) -> None:
        c = corral.Client("http://127.0.0.1:1", "t", connect_timeout=3)
        t0 = time.monotonic()
        with self.assertRaises(corral.ConnectionFailed) as cm:
            corral.Sandbox.list(client=c)
        self.assertIn("cannot reach corral", str(cm.exception))
        self.assertLess(time.monotonic() - t0, 30)
        self.assertIsInstance(cm.exception, corral.CorralError)

    def test_silent_daemon_times_out(self) -> None:
        import socket
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)  # accepts the connection, never answers
        try:
            c = corral.Client("http://127.0.0.1:%d" % srv.getsockname()[1], "t", read_timeout=1)
            with self.assertRaises(corral.ConnectionFailed):
                corral.Sandbox.from_id("x", client=c)
        finally:
            srv.close()

    def test_wrong_types(self) -> None:
        c = corral.Client("http://127.0.0.1:1", "t")
        with self.assertRaises(corral.InvalidArgument):
            corral.Sandbox.create(memory="big", client=c)  # type: ignore[arg-type]
        with self.assertRaises(corral.InvalidArgument):
            corral.Sandbox.create("echo", 3, client=c)  # type: ignore[arg-type]
        with self.assertRaises(corral.CorralError):
            corral.Client("ftp://x", "t")


@NEEDS
class TestErrorsFromAPI(unittest.TestCase):
    def test_unknown_sandbox(self) -> None:
        with self.assertRaises(corral.NotFound) as cm:
            corral.Sandbox.from_id("sb-does-not-exist")
        self.assertEqual(cm.exception.code, "not_found")
        self.assertEqual(cm.exception.status, 404)
        self.assertTrue(cm.exception.message)

    def test_bad_argument(self) -> None:
        with self.assertRaises(corral.InvalidArgument) as cm:
            corral.Sandbox.create(memory=-5)
        self.assertIn("memory", cm.exception.message)
        with self.assertRaises(corral.InvalidArgument):
            corral.Sandbox.create(runtime="no-such-runtime")

    def test_bad_token(self) -> None:
        c = corral.Client(token="wrong")
        with self.assertRaises(corral.PermissionDenied):
            corral.Sandbox.list(client=c)


if __name__ == "__main__":
    unittest.main()
