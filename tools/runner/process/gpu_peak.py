"""A test's peak GPU memory, its rank processes' included: what tools/runner/gpu_share.py shares by.

The runner's test process prints one line when its tests end (`report_peak`), which
tools/update_test_times.py records as the target's GPU_PEAK_MIB in tools/test_times.bzl:

    torch_test gpu memory: peak_mib=N

N is per GPU, as gpu_share.py leases slots of each GPU: the test process's own peak (the caching
allocator's, on its busiest GPU) plus the largest peak any of its rank processes reported. The
multi-process harness runs one rank per leased GPU (test_utils.distributed), and each rank sends
its own peak_mib() to the test process when it returns (`note_rank_peak`). Without those reports
a multi-GPU target, whose test process uses no GPU itself, had no peak and never shared a GPU.
Ranks started by other launchers (torch's own MultiProcessTestCase) and any other Python process
the tests start leave their peak in a file at exit instead (tools/runner/process/descendants.py),
which the test process reads as it reads its ranks' (`report_peak`'s `descendants` folder).

Standard library only: rank processes import it, and so does the runner's parent process.
"""

import os
import sys

PEAK_LINE = "torch_test gpu memory: peak_mib="
PEAK_SUFFIX = ".mib"  # a file a process other than the test's left its peak in

_rank_peaks_mib: list[int] = []


def peak_mib() -> int | None:
    """This process's peak GPU memory on its busiest GPU, in MiB, or None if it used no CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    peak = max(torch.cuda.max_memory_reserved(d) for d in range(torch.cuda.device_count()))
    return peak // 2**20


def note_rank_peak(mib: int) -> None:
    """Called in the test process with a rank process's peak_mib()."""
    _rank_peaks_mib.append(int(mib))


def descendant_peaks(folder: str | None) -> list[int]:
    """The peaks the test's other Python processes left in `folder` (descendants.py)."""
    if not folder or not os.path.isdir(folder):
        return []
    peaks = []
    for name in os.listdir(folder):
        if not name.endswith(PEAK_SUFFIX):
            continue  # one being written when its process died
        with open(os.path.join(folder, name)) as f:
            peaks.append(int(f.read()))
    return peaks


def report_peak(log=sys.stderr, descendants: str | None = None) -> None:
    """Prints the test's peak per GPU, if this process, a rank of it or another process it
    started (which left its peak in the folder `descendants`) used CUDA."""
    own = peak_mib()
    others = _rank_peaks_mib + descendant_peaks(descendants)
    if own is None and not others:
        return
    # A rank shares its GPU with this process's own use of that GPU, if any.
    peak = (own or 0) + max(others, default=0)
    # On a line of its own: pytest leaves its progress line ("....  [100%]") unterminated.
    print(f"\n{PEAK_LINE}{peak}", file=log)
