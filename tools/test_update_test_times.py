"""The runner's peak-GPU-memory line is recorded by tools/update_test_times.py.

Measured on the H100 image: pytest leaves its progress line ("....  [100%]") open, so a peak
line printed right after it was glued to it and never matched; no peak was ever recorded.
"""

import io
import sys
import types

from tools import update_test_times
from tools.runner import gpu_share


def test_peak_after_pytest_progress_is_recorded(monkeypatch):
    cuda = types.SimpleNamespace(
        is_initialized=lambda: True,
        device_count=lambda: 1,
        max_memory_reserved=lambda device: 10264 * 2**20,
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    log = io.StringIO()
    log.write("distributed_tests/test_dynamo_distributed.py .....   [100%]")
    gpu_share.report_peak(log)
    assert update_test_times.PEAK.findall(log.getvalue()) == ["10264"]
