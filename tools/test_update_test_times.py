"""The runner's peak-GPU-memory line is recorded by tools/update_test_times.py.

Measured on the H100 image: pytest leaves its progress line ("....  [100%]") open, so a peak
line printed right after it was glued to it and never matched; no peak was ever recorded.
"""

import io
import sys
import types

from tools import update_test_times
from tools.runner.process import gpu_peak


def test_peak_after_pytest_progress_is_recorded(monkeypatch):
    cuda = types.SimpleNamespace(
        is_initialized=lambda: True,
        device_count=lambda: 1,
        max_memory_reserved=lambda device: 10264 * 2**20,
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    log = io.StringIO()
    log.write("distributed_tests/test_dynamo_distributed.py .....   [100%]")
    gpu_peak.report_peak(log)
    assert update_test_times.PEAK.findall(log.getvalue()) == ["10264"]


def test_rank_peaks_add_to_the_test_process_own_use_of_a_gpu(monkeypatch):
    # One rank per leased GPU (test_utils.distributed): a GPU holds the largest rank's memory
    # beside whatever the test process itself put there.
    cuda = types.SimpleNamespace(
        is_initialized=lambda: True,
        device_count=lambda: 2,
        max_memory_reserved=lambda device: (1000 if device == 0 else 10) * 2**20,
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(gpu_peak, "_rank_peaks_mib", [])
    gpu_peak.note_rank_peak(5120)
    gpu_peak.note_rank_peak(3000)
    log = io.StringIO()
    gpu_peak.report_peak(log)
    assert update_test_times.PEAK.findall(log.getvalue()) == ["6120"]


def test_a_test_process_without_cuda_reports_its_ranks_peak(monkeypatch):
    cuda = types.SimpleNamespace(is_initialized=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(gpu_peak, "_rank_peaks_mib", [])
    log = io.StringIO()
    gpu_peak.report_peak(log)
    assert log.getvalue() == ""  # no GPU used: no record, so never shared
    gpu_peak.note_rank_peak(5120)
    gpu_peak.report_peak(log)
    assert update_test_times.PEAK.findall(log.getvalue()) == ["5120"]
