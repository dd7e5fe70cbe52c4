"""Where test processes keep bytecode: a shared cache where the interpreter's torch ships none.

The GPU machines' image (torch 2.11.0+cu130) installs torch without .pyc files and sets
PYTHONDONTWRITEBYTECODE=1; inside Bazel's sandbox its site-packages is read-only anyway. So
every test process, rank and helper compiled torch's sources again, most of all in a process's
first inductor compile, whose CPU vector-ISA check imports torch in child processes
(bench/bytecode_cost.sh measures it; README "Numbers"). Such processes get a bytecode cache
shared by the host's tests (PYTHONPYCACHEPREFIX): Python checks each entry against its source's
mtime and size, as it does __pycache__, and writes it atomically, so concurrent tests are safe.
Entries under a test's own folders, its runfiles and TEST_TMPDIR (sandbox paths no later test
has), are removed when it ends (`forget_test_dirs`), so the cache holds only the interpreter's
packages.

Everywhere else test processes write no bytecode (PYTHONDONTWRITEBYTECODE=1, which torch_test
sets for every process, the runner's own included, so that none writes into a host
interpreter's site-packages): an interpreter whose torch has bytecode (the pinned @pypi
compiles it at fetch; a prefix would make Python ignore it) and a test that does not import
torch, whose own few sources are not worth caching. A user's PYTHONPYCACHEPREFIX
(--test_env) is left as it is.
"""

import importlib.util
import os
import shutil


def torch_lacks_bytecode() -> bool:
    """Whether this interpreter finds torch, but no bytecode next to its sources."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    return not os.path.exists(importlib.util.cache_from_source(spec.origin))


def configure(env, cache_dir: str) -> bool:
    """Sets the test processes' bytecode variables in env; True if they share cache_dir."""
    if "PYTHONPYCACHEPREFIX" in env:
        return False
    if not torch_lacks_bytecode():
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return False
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache_dir
    return True


def forget_test_dirs(env, cache_dir: str) -> None:
    """Removes cache_dir's entries under TEST_SRCDIR and TEST_TMPDIR, and empty folders above."""
    if env.get("PYTHONPYCACHEPREFIX") != cache_dir:
        return
    dirs = [env[name] for name in ("TEST_SRCDIR", "TEST_TMPDIR") if env.get(name)]
    for path in {f(d) for d in dirs for f in (os.path.abspath, os.path.realpath)}:
        mirror = cache_dir + path  # how Python maps a source path under the prefix
        shutil.rmtree(mirror, ignore_errors=True)
        try:
            os.removedirs(os.path.dirname(mirror))  # up to the first folder still in use
        except OSError:
            pass
