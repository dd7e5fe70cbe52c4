"""A cpu target's processes see no accelerator: the cpu variant's environment hides them.

So a cpu test that branches on `torch.cuda.is_available()`, and every file that instantiates
device-type test classes for the devices it sees, runs the same cases on a GPU host as on a CPU
host, and GPU work happens only under a GPU variant's lease. The fact is the variant table's
(CPU_ENV in tools/build_defs/variants.bzl); this checks it arrives, without torch. That torch
then really sees no GPU is checked on a GPU host by //tools/selftest:probe_accelerators.
"""

import os

import pytest

from tools.hardware import spec

# torch's CUDA devices, and ROCm's (HIP, and the runtime under it).
HIDING = ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"]


@pytest.mark.parametrize("name", HIDING)
def test_cpu_variant_lists_no_device(name):
    target = spec.spec()
    assert target.declared_variants and target.variant == "cpu", "run me as a cpu torch_test target"
    assert os.environ.get(name) == "", f"{name}={os.environ.get(name)!r}: a cpu test may see GPUs"
