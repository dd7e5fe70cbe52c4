"""How much of its GPUs a GPU test leases, from measured facts: whole GPUs or a memory share.

Tests bound by compiling on the CPU leave the GPU mostly idle, so several of them on one GPU
finish sooner (bench/results/gpu_suite_2026-11-23_nvidia-h200-x2.md). Sharing must never
turn an OOM into a flake, so each GPU is cut into SLOTS slots of equal memory (of the smallest
visible GPU) and a test takes as many as its recorded peak GPU memory needs, with a margin for
what the caching allocator does not count (CUDA context, library workspaces); its memory is
then capped at those slots (tools/runner/process/memory_cap.py). A small test thus runs beside
two large ones instead of holding half a GPU while a large one waits. Otherwise it takes
every slot of its GPUs:

  the target says it needs a whole GPU     TORCH_TEST_WHOLE_GPU=1 (torch_test whole_gpu = True)
  no peak recorded for the target          TORCH_TEST_GPU_PEAK_MIB unset (e.g. never recorded,
                                           or ranks of a launcher that reports none)
  the peak needs every slot                peak * MARGIN + CONTEXT_MIB > GPU memory - one slot

Peaks are recorded like durations: the runner prints the test's peak per GPU, its rank
processes' included (tools/runner/process/gpu_peak.py), tools/update_test_times.py writes
GPU_PEAK_MIB
in tools/test_times.bzl, and tools/build_defs/recorded.bzl hands each GPU target its own.
TORCH_TEST_SLOTS_PER_GPU=N (e.g. --test_env) overrides: every test not declared whole then
takes one of N slots, whatever its memory.
"""

import dataclasses
import math
from collections.abc import Callable

from tools.hardware import envvars, probe

# Slots per GPU: at most this many tests share one GPU. An H100's slot is ~5 GiB: with ~10 GiB
# slots a 1 GiB test held 10 GiB and a 13.6 GiB one 20, so on a 4xH100 host the recorded
# tests asked for 36 slots of 32 although their memory fits at once (49 of 64 at ~5 GiB), and
# 4-GPU tests waited for slots (bench/results/multi_gpu_before_after_2026-11-26_nvidia-h100-x4.md).
DEFAULT_SLOTS = 16
MARGIN = 1.25
CONTEXT_MIB = 1024
# The part of its wait a whole-GPU request lets shared ones (measured peaks) pass it before it
# reserves its GPUs as the head of the queue (tools/runner/gpu_lease.py, patience): draining a
# GPU for a whole-GPU test idles the GPU's other slots for as long as the longest test on it.
WHOLE_PATIENCE = 0.5


@dataclasses.dataclass(frozen=True)
class Decision:
    slots_per_gpu: int  # slots of every GPU on this host (the same for every test)
    slots_each: int  # slots this test takes on each of its GPUs
    reason: str

    @property
    def shared(self) -> bool:
        return self.slots_each < self.slots_per_gpu

    def patience(self, wait: float) -> float:
        """Seconds of a `wait`-second lease during which this request reserves nothing."""
        return 0.0 if self.shared else wait * WHOLE_PATIENCE


def decide(env, memory_mib: Callable[[], int | None] = probe.gpu_memory_mib) -> Decision:
    """The sharing decision; asks for the GPU memory (an nvidia-smi call) only when it matters."""
    explicit = env.get(envvars.SLOTS_PER_GPU)
    slots = int(explicit) if explicit else DEFAULT_SLOTS
    if slots < 1:
        raise ValueError(f"{envvars.SLOTS_PER_GPU}={explicit}: must be >= 1")
    if env.get(envvars.WHOLE_GPU) == "1":
        return Decision(slots, slots, f"the target needs whole GPUs ({envvars.WHOLE_GPU}=1)")
    if explicit:
        return Decision(slots, 1, f"{envvars.SLOTS_PER_GPU}={explicit}")
    peak = env.get(envvars.GPU_PEAK_MIB)
    if not peak:
        return Decision(slots, slots, "no peak GPU memory recorded for this target")
    memory = memory_mib()
    if not memory:
        return Decision(slots, slots, "GPU memory unknown")
    need = int(peak) * MARGIN + CONTEXT_MIB
    slot = memory / slots
    each = math.ceil(need / slot)
    if each >= slots:
        return Decision(slots, slots, f"needs ~{need:.0f} MiB, every slot of {memory} MiB")
    return Decision(
        slots, each, f"needs ~{need:.0f} MiB: {each} of {slots} slots of {slot:.0f} MiB"
    )
