"""corral.aio: the same SDK awaited; output by async iteration; cancellation; a dead daemon."""

import asyncio
import socket
import time
import unittest
import uuid

from _daemon import TAG, NEEDS, corral
from corral.aio import AsyncSandbox


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class TestAioOffline(unittest.TestCase):
    def test_dead_daemon_is_connection_failed_not_a_hang(self) -> None:
        dead = corral.Client("http://127.0.0.1:%d" % _closed_port(), "token", connect_timeout=2)

        async def main() -> None:
            start = time.monotonic()
            with self.assertRaises(corral.ConnectionFailed):
                await asyncio.wait_for(AsyncSandbox.create(client=dead), 30)
            with self.assertRaises(corral.ConnectionFailed):
                await AsyncSandbox.from_id("nope", client=dead)
            self.assertLess(time.monotonic() - start, 20)
            with self.assertRaises(corral.InvalidArgument):
                await AsyncSandbox.create(cpu="lots", client=dead)
        asyncio.run(main())


@NEEDS
class TestAio(unittest.TestCase):
    def test_sandbox_process_files(self) -> None:
        asyncio.run(self._sandbox_process_files())

    async def _sandbox_process_files(self) -> None:
        case = "py-aio-" + uuid.uuid4().hex[:8]
        tags = dict(TAG, case=case)
        async with await AsyncSandbox.create(timeout=600, tags=tags, name=case, workdir="/tmp") as sb:
            self.assertEqual((await AsyncSandbox.from_name(case)).id, sb.id)
            self.assertEqual([s.id for s in await AsyncSandbox.list(tags={"case": case})], [sb.id])
            self.assertEqual(await sb.get_state(), "running")
            self.assertIsNone(await sb.poll())

            # Output arrives by async iteration while the process runs; stdin is awaited.
            p = await sb.exec("sh", "-c", "echo first; echo oops >&2; read x; echo got $x; exit 5")
            lines = p.stdout.__aiter__()
            self.assertEqual(await lines.__anext__(), "first\n")
            self.assertIsNone(p.poll())
            await p.stdin.write("hi\n")
            self.assertEqual([line async for line in lines], ["got hi\n"])
            self.assertEqual(await p.stderr.read(), "oops\n")
            self.assertEqual(await p.wait(timeout=60), 5)
            self.assertEqual(p.returncode, 5)

            # Cancelling a read or a wait cancels only that: no output is lost, the process goes on.
            p = await sb.exec("sh", "-c", "read x; echo late $x; sleep 1000")
            it = p.stdout.iter_bytes().__aiter__()
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(it.__anext__(), 0.5)
            with self.assertRaises(corral.SandboxTimeout):
                await p.wait(timeout=0.5)
            task = asyncio.ensure_future(p.wait())
            await asyncio.sleep(0.1)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            self.assertIsNone(p.poll())
            await p.stdin.write("now\n")
            got = b""
            async for chunk in p.stdout.iter_bytes():
                got += chunk
                if got.endswith(b"\n"):
                    break
            self.assertEqual(got, b"late now\n")
            await p.kill()
            self.assertNotEqual(await p.wait(timeout=60), 0)

            # The filesystem and file objects, awaited.
            await sb.filesystem.write_text("a.txt", "alpha\nbeta\n")
            self.assertEqual(await sb.filesystem.read_bytes("/tmp/a.txt"), b"alpha\nbeta\n")
            self.assertTrue(await sb.filesystem.exists("a.txt"))
            async with await sb.open("b.txt", "w") as f:
                await f.write("written by aio\n")
            async with await sb.open("b.txt") as f:
                self.assertEqual([line async for line in f], ["written by aio\n"])
            names = {e.name for e in await sb.filesystem.list_files(".")}
            self.assertTrue({"a.txt", "b.txt"} <= names, names)

            await sb.set_tags({"extra": "1"})
            self.assertEqual(sb.tags.get("extra"), "1")
            await sb.set_timeout(900)
            with self.assertRaises(corral.SandboxTimeout):
                await sb.wait(timeout=1)
            with self.assertRaises(corral.NotFound):
                await sb.filesystem.read_text("/no/such/file")

    def test_wait_for_entrypoint(self) -> None:
        async def main() -> None:
            sb = await AsyncSandbox.create("sh", "-c", "sleep 1; exit 3", timeout=600, tags=TAG)
            try:
                self.assertEqual(await asyncio.wait_for(sb.wait(), 120), 3)
                self.assertEqual(await sb.poll(), 3)
            finally:
                await sb.terminate()
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
