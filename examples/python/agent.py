#!/usr/bin/env python3
"""An agent's loop in miniature with Corral's Python SDK: create a sandbox, write
the code the "model" wrote into it, run it, read its output and a file it made,
keep a memory snapshot to come back to, and terminate.

    pip install ./sdk/python
    CORRAL_URL=http://127.0.0.1:7070 CORRAL_TOKEN=$(sudo cat /var/lib/corral/token) \\
        python3 examples/python/agent.py
"""

from corral import CorralError, Sandbox

CODE = """
import json, sys
squares = {n: n * n for n in range(1, 8)}
json.dump(squares, open("/tmp/squares.json", "w"))
for n, sq in squares.items():
    print(f"{n} squared is {sq}", flush=True)
print("done", file=sys.stderr)
"""


def main() -> int:
    sb = Sandbox.create(timeout=600, workdir="/tmp", tags={"example": "agent"})
    try:
        sb.filesystem.write_text("solve.py", CODE)
        proc = sb.exec("python3", "solve.py", timeout=60, stdin=False)
        for line in proc.stdout:  # printed as the program prints it
            print("sandbox:", line, end="")
        err = proc.stderr.read()
        code = proc.wait()
        print("exit code", code, "stderr:", err.strip())
        print("result file:", sb.filesystem.read_text("squares.json"))
        snap = sb.snapshot()
        print("memory snapshot", snap["id"], "- Sandbox.create(from_snapshot=...) starts copies of it")
        return code
    except CorralError as e:
        print("corral:", type(e).__name__, e.message)
        return 1
    finally:
        sb.terminate()


if __name__ == "__main__":
    raise SystemExit(main())
