"""Every TORCH_TEST_* variable, as Python names: envvars.JOBS_DIR == "TORCH_TEST_JOBS_DIR", ...

The names are defined once, in tools/hardware/envvars.bzl (the macro and the repository rules
load it); this module reads that file's literals at import (tools.hardware.table.read_literals,
Python's ast) and serves each key of its PLUMBING, KNOBS and HOST_ENV as a module attribute, so
adding a variable there adds it here. PLUMBING's two (SPEC, RUNTIME) are tools/hardware/spec.py's
alone. Structured values are JSON (`encode`/`decode`), as Starlark's json.encode writes them: no
second encoding to parse. Standard library only: the rig and bench/ import it outside Bazel,
where envvars.bzl lies beside this file as it does in runfiles (a data dependency of
//tools/hardware:envvars).
"""

import json
import os
import pathlib

from tools.hardware.table import read_literals

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["COMMON_ENV", "PREFIX"]

# Not resolved: inside Bazel this is the runfiles tree, whose envvars.bzl is a declared input.
ENVVARS_BZL = pathlib.Path(os.path.abspath(__file__)).with_name("envvars.bzl")

_STARLARK = read_literals(ENVVARS_BZL)
# Every name starts with it; torch_test refuses a target env that sets one.
PREFIX: str = _STARLARK["PREFIX"]
# The channels of tools/hardware/spec.py: {"SPEC": "TORCH_TEST_SPEC", "RUNTIME": ...}.
PLUMBING: dict[str, str] = _STARLARK["PLUMBING"]
# {"SLOTS_PER_GPU": "TORCH_TEST_SLOTS_PER_GPU", ...}: what users set, for tests and for Bazel.
KNOBS: dict[str, str] = {**_STARLARK["KNOBS"], **_STARLARK["HOST_ENV"]}
NAMES: dict[str, str] = {**PLUMBING, **KNOBS}
# What every test process gets (torch_test's COMMON_ENV; bench/plain_env.py for plain pytest).
COMMON_ENV: dict[str, str] = _STARLARK["COMMON_ENV"]
_shadowed = NAMES.keys() & globals().keys()
_unprefixed = [value for value in NAMES.values() if not value.startswith(PREFIX)]
if _shadowed or _unprefixed:
    raise ImportError(
        f"{ENVVARS_BZL}: keys {sorted(_shadowed)} shadow this module's names, or "
        f"values {_unprefixed} lack the prefix {PREFIX!r}"
    )
globals().update(NAMES)


def __getattr__(name: str):
    # Only for names that are not defined: say where they would be.
    raise AttributeError(f"envvars has no {name!r}: add it to {ENVVARS_BZL}'s KNOBS or HOST_ENV")


def encode(value) -> str:
    """JSON as Starlark's json.encode writes it (no spaces)."""
    return json.dumps(value, separators=(",", ":"))


def decode(text: str):
    return json.loads(text)
