"""Volumes (host-side files, a write in one sandbox read in the next, read-only) and secrets (env, never listed)."""

import json
import unittest
import uuid

from _daemon import corral
from _daemon import NEEDS, create, run


@NEEDS
class TestVolumes(unittest.TestCase):
    def test_volume_outlives_a_sandbox(self) -> None:
        name = "py-vol-" + uuid.uuid4().hex[:8]
        vol = corral.Volume.create(name, size_gib=1)
        try:
            self.assertEqual(vol.size_gib, 1)
            self.assertIn(name, [v.name for v in corral.Volume.list()])
            vol.write_text("/seed/hello.txt", "from the host")

            writer = create(volumes={"/data": vol})
            try:
                self.assertEqual(run(writer, "cat", "/data/seed/hello.txt"), "from the host")
                run(writer, "sh", "-c", "echo from the writer > /data/out.txt")
                self.assertEqual(corral.Volume.from_name(name).mounted_by, [writer.id])
                with self.assertRaises(corral.Conflict):
                    vol.remove()
            finally:
                writer.terminate()

            reader = create(volumes=[vol.mount("/mnt/v", read_only=True)])
            try:
                self.assertEqual(run(reader, "cat", "/mnt/v/out.txt"), "from the writer\n")
                p = reader.exec("sh", "-c", "echo no > /mnt/v/refused", stdin=False)
                self.assertNotEqual(p.wait(), 0)
            finally:
                reader.terminate()

            self.assertEqual(vol.read_text("/out.txt"), "from the writer\n")
            names = [e.name for e in vol.list_files("/")]
            self.assertTrue({"out.txt", "seed"} <= set(names), names)  # ext4 adds lost+found
            with self.assertRaises(corral.NotFound):
                vol.read_bytes("/missing")
            with self.assertRaises(corral.InvalidArgument):
                create(volumes={"/proc": vol})
        finally:
            vol.remove(force=True)
        with self.assertRaises(corral.NotFound):
            corral.Volume.from_name(name)
        with self.assertRaises(corral.InvalidArgument):
            corral.Volume.create("../escape")


@NEEDS
class TestSecrets(unittest.TestCase):
    def test_secret_env_and_never_a_value(self) -> None:
        name = "py-sec-" + uuid.uuid4().hex[:8]
        value, rotated = "v1-" + uuid.uuid4().hex, "v2-" + uuid.uuid4().hex
        sec = corral.Secret.create(name, {"PY_TOKEN": value})
        try:
            self.assertEqual(sec.keys, ["PY_TOKEN"])
            listed = [s for s in corral.Secret.list() if s.name == name]
            self.assertEqual([s.keys for s in listed], [["PY_TOKEN"]])
            self.assertNotIn(value, json.dumps([s.info for s in corral.Secret.list()]))
            self.assertNotIn(value, json.dumps(corral.Secret.from_name(name).info))

            sb = create(secrets=[sec])
            try:
                self.assertEqual(run(sb, "sh", "-c", "printf %s \"$PY_TOKEN\""), value)
                self.assertEqual(sb.info.get("secrets"), [name])
                self.assertNotIn(value, json.dumps(sb.refresh()))
                sec.rotate({"PY_TOKEN": rotated})
                self.assertEqual(run(sb, "sh", "-c", "printf %s \"$PY_TOKEN\"", secrets=[name]), rotated)
            finally:
                sb.terminate()

            with self.assertRaises(corral.InvalidArgument) as cm:
                corral.Secret.create(name + "-bad", {"K": 12345})  # type: ignore[dict-item]
            self.assertNotIn("12345", str(cm.exception))
            with self.assertRaises(corral.NotFound):
                create(secrets=["py-no-such-secret"])
        finally:
            sec.remove()
        with self.assertRaises(corral.NotFound):
            corral.Secret.from_name(name)


if __name__ == "__main__":
    unittest.main()
