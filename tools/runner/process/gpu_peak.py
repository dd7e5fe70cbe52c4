"""A test's peak GPU memory, its rank processes' included: what tools/runner/gpu_share.py shares by.

The runner's test process prints one line when its tests end (`report_peak`), which
tools/update_test_times.py records as the target's GPU_PEAK_MIB in tools/test_times.bzl:

    torch_test gpu memory: peak_mib=N

N is per GPU, as gpu_share.py leases slots of each GPU: the test process's own peak (the caching
allocator's, on its busiest GPU) plus the largest peak any of its rank processes reported. The
multi-process harness runs one rank per leased GPU (test_utils.distributed), and each rank sends
its own peak_mib() to the test process when it returns (`note_rank_peak`). Without those reports
a multi-GPU target, whose test process uses no GPU itself, had no peak and never shared a GPU.
Ranks started by other launchers (torch's own MultiProcessTestCase) report nothing; such a
target's line then holds only its test process's own use, if any.

Standard library only: rank processes import it, and so does the runner's parent process.
"""

import sys

PEAK_LINE = "torch_test gpu memory: peak_mib="

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


def report_peak(log=sys.stderr) -> None:
    """Prints the test's peak per GPU, if this process or a rank of it used CUDA."""
    own = peak_mib()
    if own is None and not _rank_peaks_mib:
        return
    # A rank shares its GPU with this process's own use of that GPU, if any.
    peak = (own or 0) + max(_rank_peaks_mib, default=0)
    # On a line of its own: pytest leaves its progress line ("....  [100%]") unterminated.
    print(f"\n{PEAK_LINE}{peak}", file=log)
