"""How much of its GPUs a GPU test leases, from measured facts: whole GPUs or a memory share.

Tests bound by compiling on the CPU leave the GPU mostly idle, so several of them on one GPU
finish sooner (bench/results/gpu_suite_2026-11-23_nvidia-h200-x2.md). Sharing must never
turn an OOM into a flake, so each GPU is cut into SLOTS slots of equal memory (of the smallest
visible GPU) and a test takes as many as its recorded peak GPU memory needs, with a margin; its
memory is then capped at those slots (`memory_fraction`, in the runner's runtime record, which
every process of the test applies: tools/runner/process/memory_cap.py). A small test thus runs
beside two large ones instead of holding half a GPU while a large one waits. Otherwise it takes
every slot of its GPUs:

  the target says it needs a whole GPU     spec whole_gpu (torch_test whole_gpu = True)
  no peak recorded for the target          spec gpu_peak_mib None (never measured yet)
  the peak needs every slot                peak * MARGIN + CONTEXT_MIB > GPU memory - one slot

Peaks are recorded like durations: the runner measures the test's process tree from outside
(tools/runner/gpu_watch.py) into the shard's record, tools/update_test_times.py writes
GPU_PEAK_MIB in tools/test_times.bzl, and tools/build_defs/recorded.bzl hands each GPU target
its own. TORCH_TEST_SLOTS_PER_GPU=N (e.g. --test_env) overrides: every test not declared whole
then takes one of N slots, whatever its memory.

A request for whole GPUs is patient (tools/runner/gpu_lease.py): for at most its own expected
run time (`patience`) it reserves nothing, so shared tests keep running beside what is on its
GPUs (draining them idles their other slots for as long as the longest test on them runs), and
then it reserves them. So it never waits on shared tests longer than it will itself hold the
GPUs, however many keep coming.
"""

import dataclasses
import math
from collections.abc import Callable

from tools.hardware import envvars, probe, spec

# Slots per GPU: at most this many tests share one GPU. An H100's slot is ~5 GiB: with ~10 GiB
# slots a 1 GiB test held 10 GiB and a 13.6 GiB one 20, so on a 4xH100 host the recorded
# tests asked for 36 slots of 32 although their memory fits at once (49 of 64 at ~5 GiB), and
# 4-GPU tests waited for slots (bench/results/multi_gpu_before_after_2026-11-26_nvidia-h100-x4.md).
DEFAULT_SLOTS = 16
# Room for what lives between two samples of the peak (tools/runner/gpu_watch.py), and, as the
# cap holds only the caching allocator, for CUDA contexts and library workspaces beside it.
MARGIN = 1.25
CONTEXT_MIB = 1024
# A whole-GPU request's patience is at most this part of its wait, and at most its expected run
# time: its recorded seconds, else this share of its timeout (a target not yet recorded).
WHOLE_PATIENCE = 0.5
UNRECORDED_SHARE = 0.1


@dataclasses.dataclass(frozen=True)
class Decision:
    slots_per_gpu: int  # slots of every GPU on this host (the same for every test)
    slots_each: int  # slots this test takes on each of its GPUs
    reason: str
    expected_s: float | None = None  # this shard's expected run time, if anything tells

    @property
    def shared(self) -> bool:
        return self.slots_each < self.slots_per_gpu

    @property
    def fraction(self) -> float:
        """The part of each of its GPUs this test holds."""
        return self.slots_each / self.slots_per_gpu

    @property
    def memory_fraction(self) -> float | None:
        """The cap of the test's processes' GPU memory (memory_cap.py): its share, if shared."""
        return self.fraction if self.shared else None

    def patience(self, wait: float) -> float:
        """Seconds of a `wait`-second lease during which this request reserves nothing."""
        if self.shared:
            return 0.0
        expected = UNRECORDED_SHARE * wait if self.expected_s is None else self.expected_s
        return min(WHOLE_PATIENCE * wait, expected)


def expected_seconds(target: spec.Spec, env) -> float | None:
    """This shard's expected run time: its target's recorded seconds (spec durations), an even
    share per shard as tools/runner/session/sharding.py packs them; else a share of its timeout
    (TEST_TIMEOUT); None if neither is set."""
    durations = target.durations
    if durations:
        shards = max(1, int(env.get("TEST_TOTAL_SHARDS") or 1))
        return sum(durations.values()) / shards
    timeout = env.get("TEST_TIMEOUT")
    return UNRECORDED_SHARE * float(timeout) if timeout else None


def decide(
    target: spec.Spec, env, memory_mib: Callable[[], int | None] = probe.gpu_memory_mib
) -> Decision:
    """The sharing decision for the target of this spec, under the knobs and Bazel's protocol
    variables of `env`; asks for the GPU memory (an nvidia-smi call) only when it matters."""
    slots, each, reason = _slots(target, env, memory_mib)
    return Decision(slots, each, reason, expected_seconds(target, env))


def _slots(target: spec.Spec, env, memory_mib: Callable[[], int | None]) -> tuple[int, int, str]:
    """(slots per GPU, slots this test takes on each, why)."""
    explicit = env.get(envvars.SLOTS_PER_GPU)
    slots = int(explicit) if explicit else DEFAULT_SLOTS
    if slots < 1:
        raise ValueError(f"{envvars.SLOTS_PER_GPU}={explicit}: must be >= 1")
    if target.whole_gpu:
        return slots, slots, "the target needs whole GPUs (torch_test whole_gpu = True)"
    if explicit:
        return slots, 1, f"{envvars.SLOTS_PER_GPU}={explicit}"
    peak = target.gpu_peak_mib
    if peak is None:
        return slots, slots, "no peak GPU memory recorded for this target"
    memory = memory_mib()
    if not memory:
        return slots, slots, "GPU memory unknown"
    need = peak * MARGIN + CONTEXT_MIB
    slot = memory / slots
    each = math.ceil(need / slot)
    if each >= slots:
        return slots, slots, f"needs ~{need:.0f} MiB, every slot of {memory} MiB"
    return slots, each, f"needs ~{need:.0f} MiB: {each} of {slots} slots of {slot:.0f} MiB"
