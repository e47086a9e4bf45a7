"""sb.tunnels() / sb.tunnel(port): an HTTP server in the sandbox reached through its URL and a raw tunnel.

The sandbox's network is blocked: exposed ports go through the daemon and
the agent, never a route into the sandbox, and the test talks to loopback only.
"""

import time
import urllib.error
import urllib.request

from _daemon import NEEDS, corral, create

import unittest


def _get(url: str) -> "tuple[int, bytes]":
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@NEEDS
class TestPorts(unittest.TestCase):
    def test_http_server_through_tunnel(self) -> None:
        sb = create(expose=[8000, {"port": 8001, "public": True}], block_network=True, workdir="/srv")
        try:
            self.assertTrue(sb.refresh()["network"].get("block_network"))
            sb.filesystem.write_text("/srv/hello.txt", "hello through the tunnel\n")
            server = sb.exec("python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", stdin=False)
            tunnels = sb.tunnels()
            self.assertEqual(sorted(tunnels), [8000, 8001])
            t = sb.tunnel(8000)
            self.assertIn("corral_token=", t.url)
            self.assertTrue(t.url.startswith(sb._client.url + "/v1/sandboxes/"))
            self.assertFalse(tunnels[8001].token)
            self.assertNotIn("corral_token", tunnels[8001].url)

            deadline = time.monotonic() + 60
            while True:  # until the server listens
                status, body = _get(t.url_for("hello.txt"))
                if status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            self.assertEqual((status, body), (200, b"hello through the tunnel\n"))
            status, body = _get(t.url)
            self.assertEqual(status, 200)
            self.assertIn(b"hello.txt", body)  # the directory listing
            status, _ = _get(t.url.split("?")[0] + "hello.txt")
            self.assertIn(status, (401, 403))  # no token, no entry

            conn = t.connect()
            conn.settimeout(30)
            try:
                conn.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: x\r\n\r\n")
                got = b""
                while not got.endswith(b"hello through the tunnel\n"):  # the server's reply, whole
                    b = conn.recv(65536)
                    if not b:
                        break
                    got += b
            finally:
                conn.close()
            self.assertTrue(got.startswith(b"HTTP/1.0 200"), got[:200])
            self.assertTrue(got.endswith(b"hello through the tunnel\n"), got[-200:])

            with self.assertRaises(corral.NotFound):
                sb.tunnel(9999)
            server.kill()
            server.wait(timeout=60)
        finally:
            sb.terminate()


if __name__ == "__main__":
    unittest.main()
