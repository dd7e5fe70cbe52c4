"""Deterministic seeding and numerics, for fair comparisons of eager and compiled runs."""

import contextlib
import random

import numpy as np
import torch


def seed_all(seed: int = 0) -> None:
    """Seed python, numpy and torch (all devices) RNGs."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@contextlib.contextmanager
def deterministic_numerics():
    """Exact-math kernels for comparisons at tight tolerances.

    TF32 matmuls and fused SDPA kernels change results by ~1e-3 between eager and compiled
    graphs that pick different kernels; inside this block matmuls use full fp32 and attention
    uses the math kernel on every backend.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        with sdpa_kernel([SDPBackend.MATH]):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
