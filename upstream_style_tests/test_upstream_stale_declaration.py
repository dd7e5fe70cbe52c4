"""Expected to FAIL (tagged manual): a declared skip whose test now passes is stale.

Driven by //tools/runner/tests:test_upstream_fixtures, which asserts the failure and its message.
"""

from torch.testing._internal.common_utils import TestCase, run_tests


class TestStaleDeclaration(TestCase):
    def test_fixed_since(self):
        self.assertEqual(2 + 2, 4)


if __name__ == "__main__":
    run_tests()
