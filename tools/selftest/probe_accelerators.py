"""On a GPU host: a cpu target's torch sees no GPU, a gpu target's torch sees its leased one.

Run on a machine with at least one NVIDIA GPU, in host-interpreter mode (docs/python.md):
    TORCH_TEST_PYTHON=$(command -v python3) tools/bazel test \
        //tools/selftest:probe_accelerators //tools/selftest:probe_accelerators_gpu
Manual: on a CPU host the cpu case would say nothing, so it fails there rather than pass.
"""

import os

import torch

from tools.hardware import probe
from tools.runner.session import markers


def test_cpu_target_sees_no_cuda():
    assert probe.host_gpu_count() > 0, "this host has no GPU: run me on a GPU host"
    assert not torch.cuda.is_available(), (
        f"cpu target sees {torch.cuda.device_count()} CUDA device(s), "
        f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}"
    )
    assert torch.cuda.device_count() == 0


@markers.requires_gpus(1)
def test_gpu_target_sees_its_leased_gpu():
    leased = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    assert len(leased.split(",")) == 1 and leased.strip(), f"lease: {leased!r}"
    assert torch.cuda.is_available() and torch.cuda.device_count() == 1
    assert torch.ones(1024, 1024, device="cuda").sum().item() == 1024 * 1024
