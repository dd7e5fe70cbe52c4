"""Which Python this checkout's tests run on, as tools/bazel decides it, for Python tools.

tools/bazel owns the rule (resolve_mode): TORCH_TEST_PYTHON when set (a path; `pinned` or
empty: the pinned lock), else the interpreter `tools/bazel setup --host-python` wrote into the
git-ignored SETUP_FILE, else the pinned lock. The benches and add_test read it here, so a GPU
host set up once needs no variable before them either.
"""

import os
import pathlib

from tools.hardware import envvars

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SETUP_FILE = ".torch_test_host_python"
# TORCH_TEST_PYTHON's explicit choice of the pinned lock, over the setup file.
PINNED = "pinned"


def host_python(env=os.environ, root: pathlib.Path = ROOT) -> str | None:
    """The host interpreter's path, or None in pinned mode."""
    chosen = env.get(envvars.PYTHON)
    if chosen is None:
        setup = root / SETUP_FILE
        chosen = setup.read_text().strip() if setup.is_file() else ""
    return None if chosen in ("", PINNED) else chosen
