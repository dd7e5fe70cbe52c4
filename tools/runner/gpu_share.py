"""Whether a GPU test shares its GPUs with another test or takes them whole, from measured facts.

Tests bound by compiling on the CPU leave the GPU mostly idle, so two of them on one GPU finish
sooner (issue 16: 80 s -> 64 s on a 1-GPU host). Sharing must never turn an OOM into a flake,
so a test shares only when its recorded peak GPU memory, with a margin for what the caching
allocator does not count (CUDA context, library workspaces), fits in its share of the
smallest visible GPU's memory; its memory is then capped at that share
(test_utils.hardware.cap_gpu_memory). Otherwise it takes every slot of its GPUs:

  the target says it needs a whole GPU     TORCH_TEST_WHOLE_GPU=1 (torch_test whole_gpu = True)
  no peak recorded for the target          TORCH_TEST_GPU_PEAK_MIB unset (rank-process tests:
                                           ranks' memory is not recorded, so never shared)
  the peak does not fit in a share         peak * MARGIN + CONTEXT_MIB > GPU memory / slots

Peaks are recorded like durations: the runner prints `torch_test gpu memory: peak_mib=N`,
tools/update_test_times.py writes GPU_PEAK_MIB in tools/test_times.bzl, and
tools/build_defs/recorded.bzl hands each GPU target its own.
TORCH_TEST_SLOTS_PER_GPU=N (e.g. --test_env) overrides: every test not declared whole then
takes one of N slots, as before this policy.
"""

import dataclasses
import sys
from collections.abc import Callable

from test_utils import hardware

DEFAULT_SLOTS = 2
MARGIN = 1.25
CONTEXT_MIB = 1024
PEAK_LINE = "torch_test gpu memory: peak_mib="


@dataclasses.dataclass(frozen=True)
class Decision:
    slots_per_gpu: int  # slots of every GPU on this host (the same for every test)
    slots_each: int  # slots this test takes on each of its GPUs
    reason: str

    @property
    def shared(self) -> bool:
        return self.slots_each < self.slots_per_gpu


def gpu_memory_mib() -> int | None:
    """Memory of the smallest GPU on this host (nvidia-smi), or None."""
    out = hardware.nvidia_smi("--query-gpu=memory.total", "--format=csv,noheader,nounits")
    sizes = [int(line) for line in (out or "").split() if line.strip().isdigit()]
    return min(sizes) if sizes else None


def decide(env, memory_mib: Callable[[], int | None] = gpu_memory_mib) -> Decision:
    """The sharing decision; asks for the GPU memory (an nvidia-smi call) only when it matters."""
    explicit = env.get("TORCH_TEST_SLOTS_PER_GPU")
    slots = int(explicit) if explicit else DEFAULT_SLOTS
    if slots < 1:
        raise ValueError(f"TORCH_TEST_SLOTS_PER_GPU={explicit}: must be >= 1")
    if env.get("TORCH_TEST_WHOLE_GPU") == "1":
        return Decision(slots, slots, "the target needs whole GPUs (TORCH_TEST_WHOLE_GPU=1)")
    if explicit:
        return Decision(slots, 1, f"TORCH_TEST_SLOTS_PER_GPU={explicit}")
    peak = env.get("TORCH_TEST_GPU_PEAK_MIB")
    if not peak:
        return Decision(slots, slots, "no peak GPU memory recorded for this target")
    memory = memory_mib()
    if not memory:
        return Decision(slots, slots, "GPU memory unknown")
    need = int(peak) * MARGIN + CONTEXT_MIB
    share = memory / slots
    if need > share:
        return Decision(slots, slots, f"needs ~{need:.0f} MiB, a share is {share:.0f} MiB")
    return Decision(slots, 1, f"needs ~{need:.0f} MiB of a {share:.0f} MiB share")


def report_peak(log=sys.stderr) -> None:
    """Prints this process's peak GPU memory (caching allocator) if it used CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    peak = max(torch.cuda.max_memory_reserved(d) for d in range(torch.cuda.device_count()))
    # On a line of its own: pytest leaves its progress line ("....  [100%]") unterminated.
    print(f"\n{PEAK_LINE}{peak // 2**20}", file=log)
