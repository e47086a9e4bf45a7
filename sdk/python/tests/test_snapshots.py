"""pause/resume, memory snapshot and create from it, fork, filesystem snapshot, and a vm sandbox."""

import os
import unittest
import uuid

from _daemon import corral
from _daemon import NEEDS, create, run


@NEEDS
class TestSnapshots(unittest.TestCase):
    def test_pause_resume_snapshot_fork(self) -> None:
        sb = create()
        made = [sb]
        try:
            sb.filesystem.write_text("/root/mark", "kept")
            sb.pause()
            self.assertEqual(sb.state, "paused")
            sb.resume()
            self.assertEqual(sb.state, "running")
            self.assertEqual(run(sb, "cat", "/root/mark"), "kept")

            snap = sb.snapshot(name="py-" + uuid.uuid4().hex[:8])
            self.assertTrue(snap["id"])
            copy = corral.Sandbox.create(from_snapshot=snap["id"], tags={"suite": "python-sdk"})
            made.append(copy)
            self.assertEqual(copy.filesystem.read_text("/root/mark"), "kept")

            forks = sb.fork(2)
            made.extend(forks)
            self.assertEqual(len(forks), 2)
            for f in forks:
                self.assertEqual(run(f, "cat", "/root/mark"), "kept")

            tag = "py-sdk-snap:" + uuid.uuid4().hex[:8]
            img = sb.snapshot_filesystem(tag)
            self.assertTrue(img.get("digest"))
            fromimg = create(image=tag)
            made.append(fromimg)
            self.assertEqual(run(fromimg, "cat", "/root/mark"), "kept")
            with self.assertRaises(corral.InvalidArgument):
                sb.fork(0)
        finally:
            for s in made:
                try:
                    s.terminate()
                except corral.CorralError:
                    pass


@NEEDS
@unittest.skipIf(os.environ.get("CORRAL_PY_SKIP_VM"), "CORRAL_PY_SKIP_VM is set")
class TestVM(unittest.TestCase):
    def test_vm_create_exec(self) -> None:
        sb = create(runtime="vm")
        try:
            self.assertEqual(sb.info["runtime"], "vm")
            p = sb.exec("sh", "-c", "echo from-vm; cat", pty=False)
            p.stdin.write("via stdin\n")
            p.stdin.write_eof()
            self.assertEqual(p.stdout.read(), "from-vm\nvia stdin\n")
            self.assertEqual(p.wait(), 0)
            sb.filesystem.write_text("/root/v", "vm file")
            self.assertEqual(sb.filesystem.read_text("/root/v"), "vm file")
        finally:
            sb.terminate()


if __name__ == "__main__":
    unittest.main()
