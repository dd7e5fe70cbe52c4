"""Upstream-style unittest file: torch's TestCase, parametrized instantiation, run_tests().

Written in the style of PyTorch's own tests (not copied from them) to check that such a file
runs as a torch_test unchanged: its CUDA cases land in the gpu variant through torch's own
requirement decorators (tools/runner/session/upstream_decorators.py), the rest in the cpu variant.
"""

import torch
from torch.testing._internal.common_utils import (
    TestCase,
    instantiate_parametrized_tests,
    parametrize,
    requires_cuda,
    run_tests,
)
from torch.testing._internal.triton_utils import requires_cuda_and_triton


class TestArithmetic(TestCase):
    def test_add_is_commutative(self):
        a, b = torch.arange(4.0), torch.ones(4)
        self.assertEqual(a + b, b + a)

    @parametrize("n", [1, 3, 8])
    def test_cumsum_last_is_sum(self, n):
        x = torch.linspace(0, 1, n)
        self.assertEqual(x.cumsum(0)[-1], x.sum())

    @requires_cuda
    def test_copy_to_cuda_round_trips(self):
        x = torch.randn(16)
        self.assertEqual(x.cuda().cpu(), x)


class TestCompiledOnGpu(TestCase):
    @requires_cuda_and_triton
    def test_compiled_relu_matches_eager(self):
        x = torch.randn(64, device="cuda")
        compiled = torch.compile(torch.relu, backend="inductor")
        self.assertEqual(compiled(x), torch.relu(x))


instantiate_parametrized_tests(TestArithmetic)

if __name__ == "__main__":
    run_tests()
