"""Upstream-style multi-process tests: torch's MultiProcessTestCase, one process per rank.

The NCCL case needs two GPUs (skip_if_lt_x_gpu(2) + requires_nccl: multi_gpu variant) and its
world size follows the visible device count; the gloo case runs on CPU; the xccl case needs a
backend no variant offers (not applicable).
"""

import torch
import torch.distributed as dist
from torch.testing._internal.common_distributed import (
    MultiProcessTestCase,
    requires_accelerator_dist_backend,
    requires_gloo,
    requires_nccl,
    skip_if_lt_x_gpu,
)
from torch.testing._internal.common_utils import run_tests


class _RankedTest(MultiProcessTestCase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def _join_group(self, backend):
        dist.init_process_group(
            backend,
            init_method=f"file://{self.file_name}",
            rank=self.rank,
            world_size=self.world_size,
        )


class TestAllReduceGloo(_RankedTest):
    @property
    def world_size(self):
        return 2

    @requires_gloo()
    def test_sum_of_ranks(self):
        self._join_group("gloo")
        t = torch.tensor([float(self.rank)])
        dist.all_reduce(t)
        self.assertEqual(t.item(), sum(range(self.world_size)))


class TestAllReduceNccl(_RankedTest):
    @property
    def world_size(self):
        return torch.cuda.device_count()

    @requires_nccl()
    @skip_if_lt_x_gpu(2)
    def test_sum_of_ranks_on_gpus(self):
        self._join_group("nccl")
        t = torch.tensor([float(self.rank)], device=f"cuda:{self.rank}")
        dist.all_reduce(t)
        self.assertEqual(t.item(), sum(range(self.world_size)))

    @requires_accelerator_dist_backend(["xccl"])
    def test_needs_xccl(self):
        self._join_group("xccl")


if __name__ == "__main__":
    run_tests()
