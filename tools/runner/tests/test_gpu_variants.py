"""GPU variants end to end through the real runner, on a simulated 8-GPU host.

A fake `nvidia-smi` on PATH lists 8 GPUs; no test here touches CUDA. Checks that each variant
leases exactly its GPUs (a 4-GPU and a 2-GPU target at once), that multi-process tests size
their world from the lease, and that collection refuses tests no target can hold honestly.
"""

import os
import subprocess
import textwrap

from tools.runner.tests.runner_subprocess import (
    bazel_env,
    run_runner,
    spec_env,
    start_runner,
    write_tests,
)

HOST_GPUS = 8

# Each test records the GPUs it sees, then waits until the other variant's test runs too: both
# hold their leases at the same time, or neither finishes.
BODY = """
import os, pathlib, time, types
from test_utils.hardware import requires_gpus
from test_utils.multiprocess_testcase import MultiProcessTestCase
from tools.hardware import probe

def _meet(me, other):
    here = pathlib.Path(os.environ["MEETING"])
    seen = os.environ["CUDA_VISIBLE_DEVICES"]
    rank_world = MultiProcessTestCase.world_size.fget(types.SimpleNamespace(device_type="cuda"))
    (here / me).write_text(f"{seen} {probe.visible_gpu_count()} {rank_world}")
    deadline = time.monotonic() + 60
    while not (here / other).exists():
        assert time.monotonic() < deadline, f"{other} never ran while {me} held its GPUs"
        time.sleep(0.05)

@requires_gpus(4)
def test_four():
    _meet("four", "two")

@requires_gpus(2)
def test_two():
    _meet("two", "four")
"""


def fake_host(tmp_path, gpus=HOST_GPUS) -> dict:
    """Environment of a host whose nvidia-smi lists `gpus` H200s."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    lines = "".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-fake-{i})\\n" for i in range(gpus))
    smi.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
    smi.chmod(0o755)
    env = bazel_env(tmp_path, TORCH_TEST_GPU_LEASE_DIR=tmp_path / "lease")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    return env


def test_each_variant_leases_exactly_its_gpus_at_once(tmp_path):
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    test_file = write_tests(tmp_path, BODY)
    procs = {}
    for variant in ("gpu_x4", "multi_gpu"):
        run_dir = tmp_path / variant
        run_dir.mkdir()
        env = fake_host(run_dir)
        env.update(
            spec_env(
                run_dir,
                variant=variant,
                declared_variants=["cpu", "multi_gpu", "gpu_x4"],
                declared_features={"cpu": [], "multi_gpu": [], "gpu_x4": []},
            ),
            TORCH_TEST_GPU_LEASE_DIR=str(tmp_path / "lease"),
            MEETING=str(meeting),
        )
        procs[variant] = start_runner(test_file, env)
    results = {}
    for variant, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        assert proc.returncode == 0, out + err
        results[variant] = err
    seen = {name: (meeting / name).read_text().split() for name in ("four", "two")}
    four, two = (set(map(int, seen[n][0].split(","))) for n in ("four", "two"))
    assert len(four) == 4 and len(two) == 2 and not four & two, seen
    assert seen["four"][1:] == ["4", "4"], "visible GPUs and ranks of the 4-GPU test"
    assert seen["two"][1:] == ["2", "2"], "visible GPUs and ranks of the 2-GPU test"
    assert f"torch_test lease: GPUs {sorted(four)}" in results["gpu_x4"]
    assert f"torch_test lease: GPUs {sorted(two)}" in results["multi_gpu"]


def test_a_gpu_count_without_variant_fails_at_collection(tmp_path):
    body = """
        from test_utils.hardware import requires_gpus

        def test_cpu():
            pass

        @requires_gpus(3)
        def test_three():
            pass
    """
    env = fake_host(tmp_path)
    env.update(spec_env(tmp_path, variant="cpu", declared_variants=["cpu", "multi_gpu", "gpu_x4"]))
    result = run_runner(write_tests(tmp_path, textwrap.dedent(body)), env)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "no variant has exactly the GPUs these tests need" in output, output
    assert "test_three (needs 3 GPUs)" in output, output
    assert "multi_gpu=2, gpu_x4=4" in output, output


NCCL_BODY = """
from test_utils.hardware import requires_gpus, requires_nccl

def test_cpu():
    pass

@requires_gpus(2)
@requires_nccl
def test_collective():
    pass
"""


def _run_cpu_target(tmp_path, declared_features):
    # The cpu target checks the multi_gpu variant's declaration too: CPU hosts catch it.
    env = fake_host(tmp_path)
    env.update(
        spec_env(
            tmp_path,
            variant="cpu",
            declared_variants=["cpu", "multi_gpu"],
            declared_features={"cpu": [], "multi_gpu": declared_features},
        )
    )
    result = run_runner(write_tests(tmp_path, NCCL_BODY), env)
    return result.returncode, result.stdout + result.stderr


def test_nccl_marker_in_a_target_without_nccl_fails_at_collection(tmp_path):
    code, output = _run_cpu_target(tmp_path, [])
    assert code != 0
    assert "marked @requires_nccl run in variant 'multi_gpu'" in output, output
    assert "test_collective" in output


def test_declared_feature_no_test_uses_fails_at_collection(tmp_path):
    code, output = _run_cpu_target(tmp_path, ["nccl", "triton"])
    assert code != 0
    assert "lists 'multi_gpu' in triton = [...], but none of" in output, output
    assert "run in variant" not in output, "nccl is declared and used: no complaint about it"
