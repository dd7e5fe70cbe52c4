"""Deterministic seeding and numerics, for fair comparisons of eager and compiled runs."""

import contextlib
import random

import numpy as np
import torch
from torch.utils import _pytree as pytree


def seed_all(seed: int = 0) -> None:
    """Seed python, numpy and torch (all devices) RNGs."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@contextlib.contextmanager
def deterministic_numerics(sdpa_backend=None):
    """Exact-math kernels for comparisons at tight tolerances.

    TF32 matmuls and fused SDPA kernels change results by ~1e-3 between eager and compiled
    graphs that pick different kernels; inside this block matmuls use full fp32 and attention
    uses `sdpa_backend` alone (a torch.nn.attention.SDPBackend; default: the math kernel), so a
    kernel that cannot run the inputs raises instead of falling back to another.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        with sdpa_kernel([SDPBackend.MATH if sdpa_backend is None else sdpa_backend]):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def max_abs_diff(expected, actual) -> float:
    """The largest absolute difference between matching tensor leaves of two pytrees."""
    diffs = [
        (ref.detach().double() - res.detach().double()).abs().max().item()
        for ref, res in zip(pytree.tree_leaves(expected), pytree.tree_leaves(actual), strict=True)
        if isinstance(ref, torch.Tensor) and ref.numel()
    ]
    return max(diffs, default=0.0)
