"""torch's own test decorators place tests in variants, through the real runner.

One small upstream-style file uses each decorator tools/runner/session/upstream_decorators.py maps;
the
cpu target must run exactly the tests no GPU needs, report the one for a device no variant
offers as not applicable (a skip the audit accepts, with its JUnit property), and a source that
declares only the cpu variant must be refused with the GPU tests named.
"""

import xml.etree.ElementTree as ET

from tools.runner.tests.runner_subprocess import bazel_env, run_runner, write_tests

UPSTREAM_STYLE = """
import torch
from torch.testing._internal.common_device_type import (
    deviceCountAtLeast, instantiate_device_type_tests, onlyCPU, onlyCUDA, onlyXPU,
)
from torch.testing._internal.common_distributed import (
    requires_accelerator_dist_backend, requires_nccl, skip_if_lt_x_gpu,
)
from torch.testing._internal.common_utils import TestCase, requires_cuda
from torch.testing._internal.triton_utils import requires_cuda_and_triton, requires_gpu


class TestPlain(TestCase):
    def test_cpu(self):
        pass

    @requires_cuda
    def test_one_gpu(self):
        pass

    @requires_cuda_and_triton
    def test_triton(self):
        pass

    @requires_gpu
    def test_any_gpu(self):
        pass

    @requires_nccl()
    @skip_if_lt_x_gpu(2)
    def test_two_gpus_nccl(self):
        pass

    @requires_accelerator_dist_backend(["nccl", "xccl"])
    @skip_if_lt_x_gpu(3)
    def test_three_gpus_nccl(self):
        pass


class TestDevice(TestCase):
    def test_any(self, device):
        pass

    @onlyCUDA
    def test_cuda(self, device):
        pass

    @onlyCPU
    def test_cpu(self, device):
        pass

    @onlyXPU
    def test_xpu(self, device):
        pass

    @deviceCountAtLeast(2)
    def test_two_devices(self, devices):
        pass


instantiate_device_type_tests(TestDevice, globals())
"""

ALL_VARIANTS = ["cpu", "gpu", "multi_gpu", "gpu_x4"]
FEATURES = {"cpu": [], "gpu": ["triton"], "multi_gpu": ["nccl"], "gpu_x4": ["nccl"]}


def _cases(path):
    return {
        f"{case.get('classname').rsplit('.', 1)[-1]}::{case.get('name')}": case
        for case in ET.parse(path).getroot().iter("testcase")
    }


def test_cpu_target_runs_what_needs_no_gpu_and_reports_not_applicable(tmp_path):
    test_file = write_tests(tmp_path, UPSTREAM_STYLE)
    env = bazel_env(
        tmp_path,
        dict(variant="cpu", declared_variants=ALL_VARIANTS, declared_features=FEATURES),
        CUDA_VISIBLE_DEVICES="",
    )
    result = run_runner(test_file, env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    cases = _cases(tmp_path / "test.xml")
    assert sorted(cases) == [
        "TestDeviceCPU::test_any_cpu",
        "TestDeviceCPU::test_cpu_cpu",
        "TestDeviceCPU::test_xpu_cpu",
        "TestPlain::test_cpu",
    ]
    skipped = cases["TestDeviceCPU::test_xpu_cpu"].find("skipped")
    assert skipped is not None
    assert "not applicable to this hardware table: runs only on xpu" in skipped.get("message")
    properties = {
        p.get("name"): p.get("value") for p in cases["TestDeviceCPU::test_xpu_cpu"].iter("property")
    }
    assert properties == {"torch_test.not_applicable": "runs only on xpu"}


def test_source_without_gpu_targets_is_refused_naming_each_gpu_test(tmp_path):
    test_file = write_tests(tmp_path, UPSTREAM_STYLE)
    env = bazel_env(
        tmp_path,
        dict(variant="cpu", declared_variants=["cpu"], declared_features={"cpu": []}),
        CUDA_VISIBLE_DEVICES="",
    )
    result = run_runner(test_file, env)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "belong to variants this source declares no target for" in out
    orphans = sorted(
        line.split("::", 1)[1] for line in out.splitlines() if "test_fixture.py::" in line
    )
    assert orphans == [
        "TestDeviceCUDA::test_any_cuda (gpu)",
        "TestDeviceCUDA::test_cuda_cuda (gpu)",
        "TestDeviceCUDA::test_two_devices_cuda (multi_gpu)",
        "TestPlain::test_any_gpu (gpu)",
        "TestPlain::test_one_gpu (gpu)",
        "TestPlain::test_three_gpus_nccl (gpu_x4)",
        "TestPlain::test_triton (gpu)",
        "TestPlain::test_two_gpus_nccl (multi_gpu)",
    ]


# torch's MultiProcessTestCase whose world size comes to 0 (here from the environment, so the
# placement by device count leaves it in the cpu variant): no rank would run the test, and
# torch's return-code check would pass it.
NO_RANKS = """
import os

from torch.testing._internal.common_distributed import MultiProcessTestCase


class TestWorld(MultiProcessTestCase):
    @property
    def world_size(self):
        return int(os.environ.get("FIXTURE_WORLD_SIZE", "0"))

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def test_all_ranks_agree(self):
        assert False, "no rank ever runs this"
"""


def test_a_multi_process_test_without_ranks_fails(tmp_path):
    result = run_runner(write_tests(tmp_path, NO_RANKS), bazel_env(tmp_path))
    assert result.returncode != 0, result.stdout + result.stderr
    assert "world size 0, so no rank would run the test" in result.stdout + result.stderr
