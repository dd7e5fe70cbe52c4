"""The environment bench/ gives plain pytest: what torch_test gives a test of the same variant.

The ratios the benches report compare Bazel with plain pytest, so both sides must run the tests
under the same variables: torch_test's COMMON_ENV (tools/hardware/envvars.bzl), the variant's
env from the table (tools/build_defs/variants.bzl), the target's spec (tools/hardware/spec.py),
the runner's pytest plugin settings; and none of this process's TORCH_TEST_* variables or
compiler choice.
"""

import os
import pathlib
import subprocess

from tools.hardware import envvars, spec, table
from tools.runner import bytecode
from tools.runner.process import private_dirs

# Bazel's tests never see these (its strict action environment passes neither), so inductor
# builds their kernels, and probes its vector ISAs, with the `g++` on PATH: plain pytest must
# not build with another compiler (GPU images may set CXX to a wrapper of their own).
COMPILER_VARIABLES = ("CXX", "CC")


def without_compiler_variables(env) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in COMPILER_VARIABLES}


def plain_pytest_env(
    variant: str,
    pythonpath: str,
    caches: pathlib.Path,
    python: str,
    kernels: pathlib.Path | None = None,
    declared_variants: list[str] | None = None,
) -> dict[str, str]:
    """This process's environment as a plain pytest run of `variant` with `python` needs it,
    bytecode under `caches`, kernel caches under `kernels` (default `caches`), the source's
    targets `declared_variants` (its torch_test's variants)."""
    env = {
        k: v
        for k, v in without_compiler_variables(os.environ).items()
        if not k.startswith(envvars.PREFIX)
    }
    env.update(envvars.COMMON_ENV)
    env.update(table.table()["VARIANTS"][variant]["env"])
    env.update(spec.Spec(variant=variant, declared_variants=declared_variants).env())
    env.update({"PYTHONPATH": pythonpath, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    # In /tmp beside the runner's kernel caches, and as private (bytecode and kernels are
    # loaded as they are found).
    kernels = private_dirs.ensure(kernels or caches)
    private_dirs.ensure(caches)
    env.update(
        TORCHINDUCTOR_CACHE_DIR=str(kernels / "inductor"), TRITON_CACHE_DIR=str(kernels / "triton")
    )
    # The same bytecode as Bazel's tests get (compiled as @pypi's fetch compiles it, where the
    # interpreter's torch ships none; then the runner's decision), not the image's
    # PYTHONDONTWRITEBYTECODE: the ratios then measure scheduling, and a bound is not inflated
    # by sources compiled again in every process.
    env.pop("PYTHONPYCACHEPREFIX", None)
    prefix = caches / "bytecode"
    if not prefix.is_dir():
        subprocess.run([python, "-I", bytecode.__file__, "compile", str(prefix)], check=True)
    bytecode.configure(env, str(prefix))
    return env
