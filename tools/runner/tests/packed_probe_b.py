"""Half of //tools/runner/tests:packed_probe (torch_test srcs): both files run in one process."""

import sys


def test_other_file_collected_in_this_process():
    assert any(name.endswith("packed_probe_a") for name in sys.modules), sorted(sys.modules)
