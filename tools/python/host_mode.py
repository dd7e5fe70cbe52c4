"""Which Python this checkout's tests run on, for Python tools: tools/bazel's answer.

tools/bazel owns the rule (resolve_mode: TORCH_TEST_PYTHON when set, else the interpreter
`tools/bazel setup --host-python` wrote down, else the pinned lock); `tools/bazel host-python`
prints its choice. The benches and add_test ask it here, so a GPU host set up once needs no
variable before them either.
"""

import os
import pathlib
import subprocess

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["PINNED", "host_python"]

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
# TORCH_TEST_PYTHON's explicit choice of the pinned lock, over the setup file (tools/bazel's).
PINNED = "pinned"


def host_python(env=os.environ, root: pathlib.Path = ROOT) -> str | None:
    """The host interpreter's path, or None in pinned mode."""
    asked = [str(root / "tools" / "bazel"), "host-python"]
    chosen = subprocess.run(asked, env=env, capture_output=True, text=True, check=True).stdout
    return chosen.strip() or None
