"""Where test processes find bytecode: one compiled at fetch time, that no test can write.

The GPU machines' image installs torch without .pyc files and sets PYTHONDONTWRITEBYTECODE=1,
so every test process, rank and helper would compile torch's sources again (a first inductor
compile's vector-ISA check and `import torch` cost many seconds each without bytecode:
bench/bytecode_cost.sh). Such interpreters get bytecode that only a trusted step writes:

* Written once per environment, by @pypi's repository rule in host-interpreter mode
  (tools/python/pypi.bzl runs `bytecode.py compile DIR`): every directory on the interpreter's
  sys.path is compiled into @pypi's `pycache/` (a PYTHONPYCACHEPREFIX tree). @pypi is re-created
  whenever the environment's content fingerprint changes (tools/python/env_fingerprint.py), so
  no bytecode outlives the environment it was compiled from; entries are checked-hash pycs, so
  even a plain bazel-4 call that skips the fingerprint gets source-validated bytecode.
* Read, never written, by tests: the runner points PYTHONPYCACHEPREFIX at that tree (found
  through the real path of @pypi's fingerprint.txt, a runfile of every test) and keeps
  PYTHONDONTWRITEBYTECODE=1. The tree lives in Bazel's output base, which the linux-sandbox
  mounts read-only for test actions, so a test that writes a forged entry there fails with
  EROFS, and a later target imports what @pypi compiled. Validation alone would not protect:
  a forged pyc can carry the real source's hash or mtime and size; what protects is that no
  test can write. (A test run unsandboxed, `--spawn_strategy=local`, can write anywhere, the
  sources included: no bytecode design defends that.) Remote workers lack the tree: no bytecode.

Everywhere else test processes write no bytecode (PYTHONDONTWRITEBYTECODE=1, which torch_test
sets for every process, the runner's own included, so none writes into a host interpreter's
site-packages): an interpreter whose torch has bytecode (the pinned @pypi compiles it at fetch;
a prefix would make Python ignore it). A user's PYTHONPYCACHEPREFIX (--test_env) is left as it
is. Standard library only: the repository rule runs this file as a script.
"""

import importlib.util
import os
import subprocess
import sys

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["configure"]

# @pypi's folder of bytecode, beside fingerprint.txt.
PREFIX_DIR = "pycache"
FINGERPRINT = "fingerprint.txt"


def torch_lacks_bytecode() -> bool:
    """Whether this interpreter finds torch, but no bytecode next to its sources."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    return not os.path.exists(importlib.util.cache_from_source(spec.origin))


def compile_into(prefix: str, dirs: list[str] | None = None) -> bool:
    """The trusted step (@pypi's fetch): compiles `dirs` into `prefix` if torch lacks bytecode.

    `dirs` defaults to sys.path, the stdlib included: with a prefix set Python looks for every
    module's bytecode there only.
    """
    if not torch_lacks_bytecode():
        return False
    if dirs is None:
        here = os.path.dirname(os.path.realpath(__file__))  # on sys.path as the script's folder
        dirs = sorted({os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)} - {here})
    # The prefix goes in the environment, not `-X pycache_prefix`: from Python 3.12 compileall's
    # workers are forkserver children, which get neither -X options nor (under -I) the
    # environment, and wrote the bytecode beside the sources instead. A clean environment and
    # -s (no user site, passed on to the workers) keep sys.path the interpreter's own.
    argv = [sys.executable, "-s", "-m", "compileall", "-q", "-j", "0"]
    argv += ["--invalidation-mode", "checked-hash", *dirs]
    env = {"PYTHONHASHSEED": "0", "PYTHONPYCACHEPREFIX": os.path.abspath(prefix)}
    # A few files never compile (Python 2 leftovers in packages): Python compiles them in
    # memory when imported, as without a cache.
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=False, env=env)
    return True


def precompiled_prefix(env) -> str | None:
    """@pypi's bytecode folder on this host, through its fingerprint runfile's real path."""
    srcdir = env.get("TEST_SRCDIR")
    if not srcdir:
        return None
    workspace = env.get("TEST_WORKSPACE", "")
    for candidate in (
        os.path.join(srcdir, "pypi", FINGERPRINT),
        os.path.join(srcdir, workspace, "external", "pypi", FINGERPRINT),
    ):
        if os.path.exists(candidate):
            prefix = os.path.join(os.path.dirname(os.path.realpath(candidate)), PREFIX_DIR)
            return prefix if os.path.isdir(prefix) else None
    return None


def configure(env, prefix: str | None) -> bool:
    """Sets the test processes' bytecode variables in env; True if they read `prefix`."""
    if "PYTHONPYCACHEPREFIX" in env:
        return False
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if prefix and os.path.isdir(prefix) and torch_lacks_bytecode():
        env["PYTHONPYCACHEPREFIX"] = prefix
        return True
    return False


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "compile":
        sys.exit("usage: bytecode.py compile PREFIX_DIR [DIR...]   (default: sys.path)")
    compile_into(sys.argv[2], sys.argv[3:] or None)
