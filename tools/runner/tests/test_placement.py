"""Every target's log says where its source's cases went, and multi-process tests whose world
size follows the visible devices go where there are at least 2 (through the real runner)."""

from tools.runner.session import placement
from tools.runner.tests.runner_subprocess import bazel_env, run_runner, write_tests

UPSTREAM_STYLE = """
import torch
from torch.testing._internal.common_distributed import (
    MultiProcessTestCase, requires_accelerator_dist_backend, requires_nccl,
)
from torch.testing._internal.common_utils import TestCase, requires_cuda


class TestPlain(TestCase):
    def test_cpu(self):
        pass

    @requires_cuda
    def test_one_gpu(self):
        pass


@requires_accelerator_dist_backend(["nccl", "xccl"])
class TestRanksFollowDevices(MultiProcessTestCase):
    @property
    def world_size(self):
        return torch.accelerator.device_count()

    def test_all_reduce(self):
        pass

    def test_broadcast(self):
        pass


class TestFixedWorld(MultiProcessTestCase):
    @property
    def world_size(self):
        return 1  # the file says one rank is what it means

    @requires_nccl()
    def test_single_rank_nccl(self):
        pass
"""

DECLARED = dict(
    variant="cpu",
    declared_variants=["cpu", "gpu", "multi_gpu"],
    declared_features={"cpu": [], "gpu": ["nccl"], "multi_gpu": ["nccl"]},
)


def test_log_counts_each_sibling_variants_cases_and_lists_them_on_request(tmp_path):
    test_file = write_tests(tmp_path, UPSTREAM_STYLE)
    result = run_runner(test_file, bazel_env(tmp_path, DECLARED, CUDA_VISIBLE_DEVICES=""))
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "torch_test placement: cpu=1 gpu=2 multi_gpu=2 (this target: cpu)" in out
    assert placement.parse(out) == ({"cpu": 1, "gpu": 2, "multi_gpu": 2}, "cpu")
    assert "placement: multi_gpu:" not in out

    shown = run_runner(
        test_file,
        bazel_env(tmp_path, DECLARED, CUDA_VISIBLE_DEVICES="", TORCH_TEST_SHOW_PLACEMENT="1"),
    )
    lines = (shown.stdout + shown.stderr).splitlines()
    assert sorted(
        line for line in lines if line.startswith("torch_test placement: multi_gpu:")
    ) == [
        "torch_test placement: multi_gpu: test_fixture.py::TestRanksFollowDevices::test_all_reduce",
        "torch_test placement: multi_gpu: test_fixture.py::TestRanksFollowDevices::test_broadcast",
    ]
    assert (
        "torch_test placement: gpu: test_fixture.py::TestFixedWorld::test_single_rank_nccl" in lines
    )


def test_a_source_without_cases_names_the_imports_that_failed(tmp_path):
    # As upstream guards torchrec: the missing package leaves a class that is no test case.
    test_file = write_tests(
        tmp_path,
        """
        import unittest

        try:
            import torch_test_no_such_package

            Base = unittest.TestCase
        except ImportError:
            Base = object


        class NeedsItTests(Base):  # not Test*: pytest collects it only as a TestCase
            def test_uses_it(self):
                pass
        """,
    )
    only_cpu = dict(DECLARED, declared_variants=["cpu"], declared_features={"cpu": []})
    result = run_runner(test_file, bazel_env(tmp_path, only_cpu, CUDA_VISIBLE_DEVICES=""))
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "no tests selected in this target" in out
    assert "imports that found no module while collecting it (a missing dep?): " in out
    assert "torch_test_no_such_package" in out
