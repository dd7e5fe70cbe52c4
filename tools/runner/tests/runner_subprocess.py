"""Runs the real runner (tools/runner/pytest_runner.py) in a subprocess, as Bazel would.

Shared by the runner's self-tests: a generated test file, the environment Bazel gives a test
(this interpreter's, minus the protocol variables of the test we are running in), and the
runner started on it, either to completion or in the background.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

from tools.hardware import envvars, spec
from tools.results import record

RUNNER = pathlib.Path(__file__).resolve().parents[1] / "pytest_runner.py"

# Set by Bazel, torch_test and the runner for the test we run in; the runner under test gets
# its own.
_OUR_PROTOCOL = ("TEST_", "TESTBRIDGE_", "XML_")
_OUR_VARIANT = (
    envvars.SPEC,
    envvars.RUNTIME,
    envvars.HOST_GPUS,
    "PYTHONPYCACHEPREFIX",
    "PYTHONDONTWRITEBYTECODE",
    # The cpu variant's hiding of accelerators (CPU_ENV in variants.bzl): the runner under test
    # may simulate a GPU variant.
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
)


# First lines of a generated test file whose point is not which vector ISAs the CPU has: they
# cut inductor's list to AVX2 (valid_vec_isa_list reads it when first asked), so a process with
# a cold vec-ISA memo probes one ISA with g++, not each the CPU reports; probing them all put
# these self-tests on the critical path of //... on a 2-GPU host
# (bench/results/multi_gpu_lease_2026-11-26_nvidia-h100-x2.md).
ONE_VEC_ISA = """
    from torch._inductor import cpu_vec_isa as _cpu_vec_isa

    _cpu_vec_isa.supported_vec_isa_list[:] = [
        isa for isa in _cpu_vec_isa.supported_vec_isa_list if str(isa) == "avx2"
    ]
"""


def write_tests(tmp_path, body: str, name: str = "test_fixture.py") -> pathlib.Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def bazel_env(tmp_path, spec_fields: dict | None = None, **extra) -> dict:
    """A fresh Bazel test environment under tmp_path; `spec_fields` are the target's facts
    (tools/hardware/spec.py), `extra` adds or overrides variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_OUR_PROTOCOL) and k not in _OUR_VARIANT
    }
    (tmp_path / "bazel_tmp").mkdir(exist_ok=True)
    env.update(
        TEST_SRCDIR=str(tmp_path),  # where write_tests puts the test files
        TEST_TMPDIR=str(tmp_path / "bazel_tmp"),
        XML_OUTPUT_FILE=str(tmp_path / "test.xml"),
        TEST_TARGET="//fake:target",
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
    )
    env.update(spec_env(tmp_path, **(spec_fields or {})))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def spec_env(folder, **fields) -> dict:
    """The spec's entry of a target with these facts (tools/hardware/spec.py), its recorded
    ones in a file in `folder`: the table's GPU counts stay ours (a torch_test's runfiles hold
    no table), the rest is the target's."""
    return spec.Spec(**{"variants": spec.spec().variants, **fields}).env(folder)


def start_runner(test_file: pathlib.Path, env: dict, args=()) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(RUNNER), str(test_file), *args],
        env=env,
        cwd=test_file.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_runner(
    test_file: pathlib.Path, env: dict, timeout=120, args=()
) -> subprocess.CompletedProcess:
    proc = start_runner(test_file, env, args)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def declare(tmp_path, *entries: str, declared_variants=None, cached=False, **env) -> dict:
    """A Bazel environment whose target declares `entries` ([[expect]] tables); `cached`: the
    macro's fact that Bazel caches the target's result (no `external` tag)."""
    path = tmp_path / "test_fixture.expectations.toml"
    path.write_text("\n".join("[[expect]]\n" + textwrap.dedent(e) for e in entries))
    facts = dict(expectations=str(path), declared_variants=declared_variants, cached=cached)
    return bazel_env(tmp_path, facts, **env)


def run_fixture(tmp_path, body: str, files=None, args=(), env=None):
    """The runner on `body` as test_fixture.py, beside `files` ({name: text}); the result
    carries the runner's and pytest's output and the shard's record (None if none)."""
    for name, text in (files or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    result = run_runner(write_tests(tmp_path, body), env or bazel_env(tmp_path), args=args)
    result.output = result.stdout + result.stderr
    result.record = record.read(tmp_path / "test.xml")
    return result
