"""//test_utils:torch_testing alone makes torch.testing._internal usable: importing common_utils
pulls expecttest and numpy, and its TestCase runs under the suite's runner."""

import torch
from torch.testing._internal.common_utils import TestCase


class TorchTestingLabel(TestCase):
    def test_expecttest_inline_expectation(self):
        # assertExpectedInline is expecttest's: it fails if expecttest is absent or broken.
        self.assertExpectedInline(str(torch.arange(4).sum().item()), """6""")

    def test_numpy_comparison(self):
        # common_utils.TestCase.assertEqual compares tensors with numpy arrays through numpy.
        self.assertEqual(
            torch.ones(3, dtype=torch.float64), torch.ones(3).numpy().astype("float64")
        )
