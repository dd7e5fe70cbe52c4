"""Upstream style: a torchrec test whose import is guarded, as upstream files guard theirs.

torchrec's import loads fbgemm_gpu (fbgemm-gpu-cpu in the lock, which installs torchrec
without its declared deps): without that dep the guard turns the class into a non-test, and
the target names the import that failed (tools/runner/missing_imports.py).
"""

import unittest

import torch
from torch.testing._internal.common_utils import NoTest, TestCase, run_tests

try:
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    HAS_TORCHREC = True
except ImportError:
    HAS_TORCHREC = False

# Without torchrec the class is no test case at all (common_utils' NoTest), as upstream does.
JaggedBase = TestCase if HAS_TORCHREC else NoTest


class JaggedLookupTests(JaggedBase):
    def test_lengths_split_values_by_key(self):
        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=["a", "b"],
            values=torch.tensor([1, 2, 3, 4, 5]),
            lengths=torch.tensor([2, 0, 1, 2]),
        )
        self.assertEqual(kjt["a"].values().tolist(), [1, 2])
        self.assertEqual(kjt["b"].values().tolist(), [3, 4, 5])


@unittest.skipIf(not HAS_TORCHREC, "torchrec is not installed")
class TestJaggedToDict(TestCase):
    def test_to_dict_has_every_key(self):
        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=["x"], values=torch.tensor([7, 8]), lengths=torch.tensor([2])
        )
        self.assertEqual(sorted(kjt.to_dict()), ["x"])


if __name__ == "__main__":
    run_tests()
