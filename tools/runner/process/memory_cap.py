"""Keeps a test process within the share of its GPUs that the lease gave it."""

import os

from tools.hardware import envvars


def cap_gpu_memory() -> None:
    """Caps this process's GPU memory at envvars.GPU_MEMORY_FRACTION, if the lease set one.

    tools/runner/gpu_lease.py exports the share when the test holds part of its GPUs. The cap is
    queued for CUDA's lazy initialisation, so a process that never touches CUDA (e.g. the
    parent of rank processes) creates no CUDA context for it.
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
