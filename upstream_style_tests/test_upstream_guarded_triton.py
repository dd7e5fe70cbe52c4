"""Upstream style: triton imported only where torch says it works (`if has_triton()`).

On a host without triton the import never runs, so triton is no dep (the lock has none); the
GPU test reads its need from torch's own decorator.
"""

import torch
from torch.testing._internal.common_utils import TestCase, run_tests
from torch.testing._internal.triton_utils import requires_cuda_and_triton
from torch.utils._triton import has_triton

if has_triton():
    import triton
    import triton.language as tl

    @triton.jit
    def _add_one(ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(ptr + offsets, tl.load(ptr + offsets, mask=mask) + 1, mask=mask)


class TestEagerReference(TestCase):
    def test_add_one_on_cpu(self):
        x = torch.zeros(5)
        self.assertEqual((x + 1).sum().item(), 5.0)


class TestTritonKernel(TestCase):
    @requires_cuda_and_triton
    def test_kernel_adds_one(self):
        x = torch.zeros(100, device="cuda")
        _add_one[(1,)](x, x.numel(), BLOCK=128)
        self.assertEqual(x.sum().item(), 100.0)


if __name__ == "__main__":
    run_tests()
