"""A test's peak GPU memory, measured from outside it: what tools/runner/gpu_share.py shares by.

The runner, which holds the test's GPU lease, samples nvidia-smi every SAMPLE_SECONDS in a
thread while the test runs and keeps the peak per GPU (MiB, on its busiest GPU). Every process
counts, whoever started it and whether it imports torch or not: the test process, ranks of any
launcher, probes, their CUDA contexts. The peak goes into the shard's record
(tools/results/record.py `gpu_peak_mib`), from which tools/update_test_times.py writes the
target's GPU_PEAK_MIB.

    with gpu_watch.watch(held.gpus, whole=not share.shared) as watched:
        ...run the tests...
    watched.peak_mib, watched.how

What is the test's, and what its neighbours', is told one of two ways:
  by process  where the runner's pids are the driver's (the host's pid namespace): the memory
              of every process of the runner's tree (its own pid and all its descendants),
              summed per GPU (`--query-compute-apps`).
  by GPU      in a pid namespace of its own (Bazel's linux-sandbox, the remote workers' bwrap)
              the driver's pids, which are the host's, name no process the runner can see; a
              lease that holds its GPUs whole has them to itself, so their used memory above
              what it was when the watch began is the test's (`--query-gpu`, the leased indices).
A shared lease in a pid namespace of its own measures nothing (peak None): its target keeps the
peak it has. Sampling misses what comes and goes between two samples, which gpu_share.MARGIN
covers.

Standard library only: the runner's own process.
"""

import contextlib
import dataclasses
import os
import shutil
import subprocess
import threading

SAMPLE_SECONDS = 0.5
# The inode of the kernel's first pid namespace (PROC_PID_INIT_INO), the one the NVIDIA driver
# reports pids in.
HOST_PID_NAMESPACE = "pid:[4026531836]"


@dataclasses.dataclass
class Watched:
    how: str  # "by process", "by GPU", or why nothing is measured
    peak_mib: int | None = None  # per GPU, the busiest; None: no sample measured it


def pids_are_the_drivers() -> bool:
    """Whether this process's pids are the ones nvidia-smi reports (the host's namespace)."""
    try:
        return os.readlink("/proc/self/ns/pid") == HOST_PID_NAMESPACE
    except OSError:
        return False


def parent(pid: int) -> int | None:
    """The parent's pid (/proc/<pid>/stat), or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # The name, in parentheses, may hold spaces and parentheses: the fields follow its last ")".
    return int(stat.rsplit(")", 1)[1].split()[1])


def in_tree(pid: int, root: int) -> bool:
    """Whether `pid` is `root` or one of its descendants (up the parents from `pid`)."""
    seen = set()
    while pid and pid not in seen:  # 0: above init; a loop only if pids are reused mid-walk
        if pid == root:
            return True
        seen.add(pid)
        pid = parent(pid)
    return False


def nvidia_smi(*args: str) -> list[list[str]] | None:
    """nvidia-smi's CSV rows (noheader, nounits) for `args`, or None where it gave none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, *args, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [[field.strip() for field in line.split(",")] for line in out.stdout.splitlines()]


def tree_memory(root: int) -> dict[str, int] | None:
    """MiB per GPU (by UUID) of the processes of `root`'s tree, or None if nvidia-smi failed."""
    rows = nvidia_smi("--query-compute-apps=gpu_uuid,pid,used_memory")
    if rows is None:
        return None
    used: dict[str, int] = {}
    for row in rows:
        if len(row) != 3 or not (row[1].isdigit() and row[2].isdigit()):
            continue  # e.g. "[N/A]" where the driver cannot tell a process's memory
        gpu, pid, mib = row[0], int(row[1]), int(row[2])
        if in_tree(pid, root):
            used[gpu] = used.get(gpu, 0) + mib
    return used


def gpus_memory(gpus: list[int]) -> dict[str, int] | None:
    """MiB used on each of `gpus` (nvidia-smi's indices), or None if nvidia-smi told none."""
    rows = nvidia_smi("--query-gpu=index,memory.used", "-i", ",".join(map(str, gpus)))
    used = {row[0]: int(row[1]) for row in rows or [] if len(row) == 2 and row[1].isdigit()}
    return used or None


class _Sampler:
    """Keeps the most MiB that `sample()` (MiB per GPU, or None) told on any one GPU, less that
    GPU's first sample where `from_baseline`."""

    def __init__(self, sample, from_baseline: bool):
        self.sample = sample
        self.from_baseline = from_baseline
        self.baseline: dict[str, int] | None = None
        self.peak: int | None = None

    def take(self) -> None:
        used = self.sample()
        if used is None:
            return
        if self.from_baseline and self.baseline is None:
            self.baseline = used  # the leased GPUs before the test used them
        base = self.baseline or {}
        now = max((max(0, mib - base.get(gpu, 0)) for gpu, mib in used.items()), default=0)
        self.peak = now if self.peak is None else max(self.peak, now)


@contextlib.contextmanager
def watch(gpus: list[int], whole: bool, root: int | None = None, interval=SAMPLE_SECONDS):
    """Samples the GPU memory of `root`'s process tree (default: this process's) while the block
    runs, on the leased `gpus`, held `whole` or shared; yields a Watched, its peak set on exit."""
    root = os.getpid() if root is None else root
    if pids_are_the_drivers():
        watched = Watched("by process")
        sampler = _Sampler(lambda: tree_memory(root), from_baseline=False)
    elif whole:
        watched = Watched("by GPU")
        sampler = _Sampler(lambda: gpus_memory(gpus), from_baseline=True)
    else:
        yield Watched("not measured: shared GPUs, and the driver's pids are not this namespace's")
        return
    stop = threading.Event()

    def run() -> None:
        sampler.take()  # before the test starts: the by-GPU baseline
        while not stop.wait(interval):
            sampler.take()

    thread = threading.Thread(target=run, name="gpu_watch", daemon=True)
    thread.start()
    try:
        yield watched
    finally:
        stop.set()
        thread.join()
        watched.peak_mib = sampler.peak
        if sampler.peak is None:
            watched.how += ": nvidia-smi gave no answer"
