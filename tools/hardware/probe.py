"""What GPUs and GPU software this host has, asked without creating a CUDA context.

nvidia-smi is asked once per process tree: the runner puts the answer in its runtime record
(spec.Runtime.host_gpus), and every process below reads it from there.

FEATURES holds the probe of each feature of the table (tools/build_defs/variants.bzl): the
plugin asks it before a test marked @requires_<feature>, and tools/platforms/host_hardware.bzl
runs `main` to decide which has_<feature> constraints the host offers.
Adding a feature: its row in the table, its probe below (and its marker in test_utils.hardware).
"""

import functools
import importlib.util
import json
import os
import shutil
import subprocess

from tools.hardware import envvars, spec

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["host_gpu_count", "visible_gpu_count"]


def visible_gpu_count() -> int:
    """GPUs this process may use, without creating a CUDA context in it.

    Honours CUDA_VISIBLE_DEVICES (set by the GPU lease). Asks nvidia-smi rather than torch so
    that a parent process stays CUDA-free and can still fork or lease devices afterwards.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        listed = [d for d in visible.split(",") if d.strip() and d.strip() != "-1"]
        return min(len(listed), host_gpu_count())
    return host_gpu_count()


@functools.cache
def host_gpu_count() -> int:
    """GPUs on this host: the runner's answer (spec.Runtime), else the user's (envvars.HOST_GPUS),
    else nvidia-smi's, asked once."""
    known = spec.runtime().host_gpus
    if known is not None:
        return known
    given = os.environ.get(envvars.HOST_GPUS)
    return int(given) if given else _nvidia_smi_gpus()


def nvidia_smi(*args: str) -> str | None:
    """nvidia-smi's output for `args`, or None where there is none (no driver, or it failed)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout


def _nvidia_smi_gpus() -> int:
    listing = nvidia_smi("-L") or ""
    return sum(1 for line in listing.splitlines() if line.startswith("GPU "))


def gpu_memory_mib() -> int | None:
    """Memory of the smallest GPU on this host (nvidia-smi), or None."""
    out = nvidia_smi("--query-gpu=memory.total", "--format=csv,noheader,nounits")
    sizes = [int(line) for line in (out or "").split() if line.strip().isdigit()]
    return min(sizes) if sizes else None


def has_triton() -> bool:
    """True where triton is installed and has a GPU to compile for."""
    if importlib.util.find_spec("triton") is None:
        return False
    from torch.utils._triton import has_triton as torch_has_triton

    return torch_has_triton()


def has_nccl() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_nccl_available()


# {feature: (probe, what a test that needs it is told it lacks)}, in the table's order.
FEATURES = {
    "nccl": (has_nccl, "the NCCL backend, which this torch build lacks"),
    "triton": (has_triton, "triton with a GPU, which this host lacks"),
}


def lacks(feature: str) -> str | None:
    """What this host lacks of `feature` (for the test's failure), or None if it has it."""
    has, missing = FEATURES[feature]
    return None if has() else missing


def main() -> None:
    """For host_hardware.bzl: {"cuda": bool, "features": [names]} of this interpreter's torch."""
    import torch

    features = [f for f, (has, _) in FEATURES.items() if has()]
    print(json.dumps({"cuda": torch.cuda.is_available(), "features": features}))
