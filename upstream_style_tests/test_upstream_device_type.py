"""Upstream-style device-type tests: one generic class, instantiated per device type.

CUDA-only cases (onlyCUDA) exist once, in the CUDA class (gpu variant); CPU-only ones once, in
the CPU class; a case only for a device no variant offers (onlyHPU) is reported as not
applicable by the cpu target.
"""

import torch
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyCPU,
    onlyCUDA,
    onlyHPU,
)
from torch.testing._internal.common_utils import TestCase, run_tests


class TestZerosLike(TestCase):
    @dtypes(torch.float32, torch.int64)
    def test_zeros_like_keeps_device_and_dtype(self, device, dtype):
        x = torch.ones(3, device=device, dtype=dtype)
        z = torch.zeros_like(x)
        self.assertEqual(z.device, x.device)
        self.assertEqual(z.dtype, dtype)
        self.assertEqual(int(z.abs().sum()), 0)

    @onlyCUDA
    def test_cuda_tensor_reports_cuda(self, device):
        self.assertTrue(torch.empty(1, device=device).is_cuda)

    @onlyCPU
    def test_cpu_tensor_is_not_pinned(self, device):
        self.assertFalse(torch.empty(1, device=device).is_pinned())

    @onlyHPU
    def test_hpu_tensor_reports_hpu(self, device):
        self.assertEqual(torch.empty(1, device=device).device.type, "hpu")


instantiate_device_type_tests(TestZerosLike, globals())

if __name__ == "__main__":
    run_tests()
