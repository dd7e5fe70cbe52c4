"""Keeps a test process within the share of its GPUs that it leased.

The one part of GPU memory's policy inside the test's processes: their peak is measured from
outside, by the runner (tools/runner/gpu_watch.py).
"""

import os

from tools.hardware import envvars


def cap_gpu_memory() -> None:
    """Caps this process's GPU memory at envvars.GPU_MEMORY_FRACTION, if the runner set one.

    The runner exports the share when the test holds part of its GPUs (tools/runner/gpu_share.py
    `cap_env`). The cap is queued for CUDA's lazy initialisation, so a process that never
    touches CUDA (e.g. the parent of rank processes) creates no CUDA context for it.
    """
    fraction = os.environ.get(envvars.GPU_MEMORY_FRACTION)
    if not fraction:
        return
    import torch

    def apply() -> None:
        for device in range(torch.cuda.device_count()):
            torch.cuda.set_per_process_memory_fraction(float(fraction), device)

    if torch.cuda.is_initialized():
        apply()
    else:
        torch.cuda._lazy_call(apply)  # runs inside torch.cuda's lazy init, after the context
