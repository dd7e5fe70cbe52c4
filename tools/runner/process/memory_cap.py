"""Keeps a test process within the share of its GPUs that it leased.

The one part of GPU memory's policy inside the test's processes: their peak is measured from
outside, by the runner (tools/runner/gpu_watch.py).
"""

from tools.hardware import spec


def cap_gpu_memory() -> None:
    """Caps this process's GPU memory at its runtime record's gpu_memory_fraction, if any.

    The runner records the share when the test holds part of its GPUs (tools/runner/gpu_share.py
    `memory_fraction`). The cap is queued for CUDA's lazy initialisation, so a process that never
    touches CUDA (e.g. the parent of rank processes) creates no CUDA context for it.
    """
    fraction = spec.runtime().gpu_memory_fraction
    if fraction is None:
        return
    import torch

    def apply() -> None:
        for device in range(torch.cuda.device_count()):
            torch.cuda.set_per_process_memory_fraction(fraction, device)

    if torch.cuda.is_initialized():
        apply()
    else:
        torch.cuda._lazy_call(apply)  # runs inside torch.cuda's lazy init, after the context
