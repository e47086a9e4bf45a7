"""Image built by the daemon on first use, run, and rebuilt from its cache.

The steps need no package mirror (run_commands, add_local_dir, env,
workdir): apt_install and pip_install are checked as rendered specs in
test_image_spec, as the build sandboxes must not reach outside the host.
"""

import logging
import os
import tempfile
import unittest
import uuid
from typing import List

from _daemon import NEEDS, TAG, corral, run


@NEEDS
class TestImageBuild(unittest.TestCase):
    def test_build_run_and_cached_rebuild(self) -> None:
        stamp = uuid.uuid4().hex  # a fresh step: the first build runs, whatever ran before
        with tempfile.TemporaryDirectory() as app:
            with open(os.path.join(app, "greet.py"), "w") as f:
                f.write("import os\nprint(os.environ['GREETING'], open('stamp').read().strip(), os.getcwd())\n")
            os.makedirs(os.path.join(app, "lib"))
            with open(os.path.join(app, "lib", "data.txt"), "w") as f:
                f.write("data\n")

            def image() -> corral.Image:
                return (corral.Image.debian()
                        .add_local_dir(app, "/opt/app")
                        .run_commands("echo %s > /opt/app/stamp" % stamp, "chmod 0644 /opt/app/stamp")
                        .env({"GREETING": "hello"})
                        .workdir("/opt/app"))

            img = image()
            with self.assertLogs("corral.image", logging.INFO) as logs:
                sb = corral.Sandbox.create(image=img, timeout=600, tags=TAG)  # built on first use
            try:
                self.assertTrue(any("done in" in line for line in logs.output), logs.output)
                self.assertTrue(any("built sha256:" in line for line in logs.output), logs.output)
                first = img.build()  # the same Image, same daemon: not sent again
                self.assertIn(2, first.ran, first)  # the run step ran
                self.assertEqual(run(sb, "python3", "greet.py"), "hello %s /opt/app\n" % stamp)
                self.assertEqual(run(sb, "cat", "lib/data.txt"), "data\n")
            finally:
                sb.terminate()

            events: List[corral.BuildEvent] = []
            again = image().build(progress=events.append)  # a new Image of the same spec: all cached
            self.assertEqual(again.digest, first.digest)
            self.assertEqual(again.ran, [], again)
            self.assertEqual(again.cached, [0, 1, 2, 3, 4], again)
            self.assertEqual(events[-1].type, "done")

            with open(os.path.join(app, "lib", "data.txt"), "w") as f:
                f.write("changed\n")
            changed = image().build()  # the copy step's content changed: it and what follows run again
            self.assertEqual(changed.cached, [0], changed)
            self.assertNotEqual(changed.digest, first.digest)

    def test_failed_step_is_an_error(self) -> None:
        img = corral.Image.debian().run_commands("echo doomed-%s; exit 3" % uuid.uuid4().hex[:6])
        seen: List[corral.BuildEvent] = []
        with self.assertRaises(corral.CorralError) as cm:
            img.build(progress=seen.append)
        self.assertIn("image build", str(cm.exception))
        self.assertTrue(any(e.type == "step" and e.status == "failed" for e in seen), seen)
        self.assertTrue(any(e.type == "output" and b"doomed-" in e.data for e in seen), seen)


if __name__ == "__main__":
    unittest.main()
