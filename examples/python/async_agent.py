#!/usr/bin/env python3
"""The agent loop of agent.py with asyncio and an Image: the tools the "model" wrote are
baked into an image (built on first use, cached after), several sandboxes run at once,
each streams its output, and the results come back through file objects.

    pip install ./sdk/python
    CORRAL_URL=http://127.0.0.1:7070 CORRAL_TOKEN=$(sudo cat /var/lib/corral/token) \\
        python3 examples/python/async_agent.py
"""

import asyncio
import os
import sys
import tempfile

from corral import CorralError, Image
from corral.aio import AsyncSandbox, build_image

TOOL = """
import sys
n = int(sys.argv[1])
print(f"{n} cubed is {n ** 3}", flush=True)
open(f"/tmp/cube-{n}.txt", "w").write(str(n ** 3))
"""


async def solve(image: Image, n: int) -> str:
    async with await AsyncSandbox.create(image=image, timeout=300, tags={"example": "async-agent"}) as sb:
        p = await sb.exec("python3", "cube.py", str(n), timeout=60, stdin=False)
        async for line in p.stdout:  # as the program prints it
            print("sandbox %d:" % n, line, end="")
        if await p.wait() != 0:
            raise RuntimeError("cube.py %d failed: %s" % (n, await p.stderr.read()))
        async with await sb.open("/tmp/cube-%d.txt" % n) as f:
            return str(await f.read())


async def main() -> int:
    with tempfile.TemporaryDirectory() as tools:
        with open(os.path.join(tools, "cube.py"), "w") as f:
            f.write(TOOL)
        image = Image.debian().add_local_dir(tools, "/opt/tools").workdir("/opt/tools")
        try:
            await build_image(image)  # once, before the sandboxes share it (progress: the corral.image logger)
            results = await asyncio.gather(*(solve(image, n) for n in (2, 3, 4)))
        except CorralError as e:
            print("corral:", type(e).__name__, e.message, file=sys.stderr)
            return 1
    print("results:", ", ".join(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
