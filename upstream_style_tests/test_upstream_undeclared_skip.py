"""Expected to FAIL (tagged manual): a skip nobody declared fails the target.

Driven by //tools/runner/tests:test_upstream_fixtures, which asserts the failure and its message.
"""

import unittest

from torch.testing._internal.common_utils import TestCase, run_tests


class TestUndeclaredSkip(TestCase):
    def test_runs(self):
        self.assertTrue(True)

    @unittest.skip("hides a problem nobody declared")
    def test_skipped_silently(self):
        self.fail("never runs")


if __name__ == "__main__":
    run_tests()
