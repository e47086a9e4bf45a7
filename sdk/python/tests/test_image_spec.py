"""Image's spec rendering and its copy layers, without a daemon.

apt_install and pip_install are checked here as the spec they render: the
tests never let a build reach a package mirror outside the host.
"""

import io
import os
import tarfile
import tempfile
import unittest

from _daemon import corral
from corral import _layer
from corral.image import BuildResult, BuildEvent


class TestImageSpec(unittest.TestCase):
    def test_spec_is_corral_image_build_spec(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            img = (corral.Image.debian()
                   .apt_install("cowsay", "jq")
                   .pip_install("requests==2.31.0", find_links=["/opt/wheels"], no_index=True)
                   .pip_install("flask", index_url="http://127.0.0.1:3141/simple", extra_index_url=["http://x/"])
                   .npm_install("left-pad", registry="http://127.0.0.1:4873")
                   .run_commands("echo a > /a", "echo b > /b")
                   .add_local_dir(d, "/opt/app")
                   .env({"MODE": "prod"})
                   .workdir("/opt/app")
                   .user("nobody")
                   .cmd("python3", "app.py")
                   .resources(cpu=1, memory_mb=1024))
            self.assertEqual(img.spec(), {
                "base": {"debian": "bookworm"},
                "steps": [
                    {"apt_install": ["cowsay", "jq"]},
                    {"pip_install": {"packages": ["requests==2.31.0"], "find_links": ["/opt/wheels"],
                                     "no_index": True}},
                    {"pip_install": {"packages": ["flask"], "index_url": "http://127.0.0.1:3141/simple",
                                     "extra_index_url": ["http://x/"]}},
                    {"npm_install": {"packages": ["left-pad"], "registry": "http://127.0.0.1:4873"}},
                    {"run": ["echo a > /a", "echo b > /b"]},
                    {"copy": {"src": os.path.abspath(d), "dst": "/opt/app"}},
                    {"env": {"MODE": "prod"}},
                    {"workdir": "/opt/app"},
                    {"user": "nobody"},
                ],
                "cmd": ["python3", "app.py"], "cpu": 1, "memory_mb": 1024,
            })

    def test_builder_methods_return_new_images(self) -> None:
        base = corral.Image.debian(packages=["curl"])
        a, b = base.run_commands("echo a"), base.run_commands("echo b")
        self.assertEqual(base.spec(), {"base": {"debian": "bookworm", "packages": ["curl"]}, "steps": []})
        self.assertEqual(a.spec()["steps"], [{"run": ["echo a"]}])
        self.assertEqual(b.spec()["steps"], [{"run": ["echo b"]}])
        self.assertEqual(corral.Image.from_registry("python:3.12").spec()["base"], {"image": "python:3.12"})

    def test_bad_input(self) -> None:
        img = corral.Image.debian()
        for bad in (lambda: img.apt_install(), lambda: img.apt_install(""), lambda: img.apt_install(3),  # type: ignore
                    lambda: img.run_commands(["echo"]),  # type: ignore[arg-type]
                    lambda: img.pip_install("x", find_links="/one"),
                    lambda: img.env({}), lambda: img.env({"A": 1}),  # type: ignore[dict-item]
                    lambda: img.workdir(""), lambda: img.add_local_dir("/no/such/dir", "/x"),
                    lambda: img.add_local_dir(".", "relative"), lambda: img.add_local_file(".", "/x"),
                    lambda: corral.Image.debian(""), lambda: corral.Sandbox.create(expose=["80"])):  # type: ignore
            with self.assertRaises(corral.InvalidArgument):
                bad()

    def test_layer_is_a_function_of_content(self) -> None:
        def layer(root: str) -> "tuple[str, bytes]":
            out = io.BytesIO()
            return _layer.write_layer(out, root, "/opt/app"), out.getvalue()

        with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
            for d, t in ((d1, 1_000_000), (d2, 2_000_000)):
                os.makedirs(os.path.join(d, "sub"))
                for name, body in (("b.txt", "b"), ("a.txt", "a"), ("sub/c.sh", "#!/bin/sh\n")):
                    p = os.path.join(d, name)
                    with open(p, "w") as f:
                        f.write(body)
                    os.utime(p, (t, t))
                os.chmod(os.path.join(d, "sub/c.sh"), 0o755)
                os.symlink("a.txt", os.path.join(d, "link"))
                os.mkfifo(os.path.join(d, "fifo"))
            (dg1, tar1), (dg2, tar2) = layer(d1), layer(d2)
            self.assertEqual(dg1, dg2)
            self.assertEqual(tar1, tar2)
            with tarfile.open(fileobj=io.BytesIO(tar1)) as tf:
                members = [(m.name, m.type, m.mode, m.uid, m.mtime) for m in tf.getmembers()]
            t0 = _layer.NORMAL_TIME
            self.assertEqual([m[0] for m in members],
                             ["opt", "opt/app", "opt/app/a.txt", "opt/app/b.txt", "opt/app/link", "opt/app/sub",
                              "opt/app/sub/c.sh"])
            self.assertEqual(members[4][1], tarfile.SYMTYPE)
            self.assertEqual(members[6][2], 0o755)
            self.assertTrue(all(m[3] == 0 and m[4] == t0 for m in members))
            with open(os.path.join(d2, "a.txt"), "w") as f:
                f.write("changed")
            self.assertNotEqual(layer(d2)[0], dg1)

    def test_build_result_counts_cached_steps(self) -> None:
        evs = [BuildEvent(e) for e in (
            {"type": "step", "step": 0, "status": "cached"},
            {"type": "step", "step": 1, "status": "running"},
            {"type": "output", "step": 1, "data": "aGk="},
            {"type": "step", "step": 1, "status": "done", "seconds": 1.5},
            {"type": "step", "step": 2, "status": "cached"},
        )]
        res = BuildResult({"digest": "sha256:x"}, evs)
        self.assertEqual((res.cached, res.ran, res.digest), ([0, 2], [1], "sha256:x"))
        self.assertEqual(evs[2].data, b"hi")


if __name__ == "__main__":
    unittest.main()
