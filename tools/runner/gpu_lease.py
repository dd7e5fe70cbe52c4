"""GPU lease: lets Bazel run tests in parallel without oversubscribing GPUs.

Bazel 4.2.3 has no GPU resource accounting, so each GPU test process leases exactly its
variant's GPUs (tools/build_defs/variants.bzl) itself before it starts: one lock file per GPU
slot under a host-wide directory.

* All-or-nothing: slots are taken while holding one allocator lock, and released at once if
  not all are free; nobody ever waits while holding a slot, so there is no deadlock.
* A test takes one slot on each GPU it uses, on the least busy GPUs. With the default one
  slot per GPU, every test (multi-GPU ones included) has whole GPUs to itself.
* Locks are flock()s: the kernel frees them when the holder exits, even by SIGKILL.
* The lease returns the environment of its holder's processes: CUDA_VISIBLE_DEVICES, the
  leased GPUs, and holding part of each GPU, TORCH_TEST_GPU_MEMORY_FRACTION (its slots / the
  slots) for tests to cap their memory (tools/runner/process/memory_cap.py). The runner puts it in
  the environment it composes for the test.

Environment:
  TORCH_TEST_GPU_LEASE_DIR   lock directory (default /dev/shm/torch_test_gpu_lease, writable in
                             Bazel's sandbox and shared by all tests on the host)
The runner waits for free GPUs until the test's deadline (TORCH_TEST_DEADLINE).
"""

import contextlib
import dataclasses
import fcntl
import os
import pathlib
import time

from tools.hardware import envvars

DEFAULT_DIR = "/dev/shm/torch_test_gpu_lease"
POLL_SECONDS = 0.2


class LeaseError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class Lease:
    gpus: list[int]
    env: dict[str, str]  # what the holder's processes need to know of the lease


def lease_env(gpus: list[int], slots_per_gpu: int, slots_each: int) -> dict[str, str]:
    added = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))}
    if slots_each < slots_per_gpu:
        added[envvars.GPU_MEMORY_FRACTION] = f"{slots_each / slots_per_gpu:.4f}"
    return added


def _lock(path: pathlib.Path, blocking: bool):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _release(fds) -> None:
    for fd in fds:
        os.close(fd)  # closing the only descriptor drops the flock


def _try_take(directory: pathlib.Path, count: int, total_gpus: int, slots_per_gpu: int, each=1):
    """`each` free slots on each of `count` GPUs, least busy GPUs first, as (gpus, fds); else None.

    Runs under the allocator lock: every free slot is locked while choosing, and all but the
    chosen ones are released before returning, so nothing is held when it returns None.
    """
    free = {}
    for gpu in range(total_gpus):
        slots = (_lock(directory / f"gpu{gpu}.slot{slot}", False) for slot in range(slots_per_gpu))
        free[gpu] = [fd for fd in slots if fd is not None]
    fitting = [gpu for gpu in free if len(free[gpu]) >= each]
    least_busy = sorted(fitting, key=lambda gpu: (-len(free[gpu]), gpu))
    chosen = sorted(least_busy[:count]) if len(least_busy) >= count else []
    kept = [fd for gpu in chosen for fd in free[gpu][:each]]
    _release([fd for fds in free.values() for fd in fds if fd not in kept])
    return (chosen, kept) if chosen else None


@contextlib.contextmanager
def lease(
    count: int,
    total_gpus: int,
    *,
    timeout: float,
    holder: str = "",
    slots_per_gpu: int = 1,
    slots_each: int = 1,
    env=os.environ,
):
    """Hold `count` GPUs for the duration of the block; yields them and their Lease.env.

    `slots_each` slots of every chosen GPU (all `slots_per_gpu` of them: the GPUs whole); the
    sharing policy that picks them (TORCH_TEST_SLOTS_PER_GPU included) is
    tools/runner/gpu_share.py, whose decision the runner passes here.
    """
    if count > total_gpus:
        raise LeaseError(f"needs {count} GPUs, found {total_gpus}")
    directory = pathlib.Path(env.get(envvars.GPU_LEASE_DIR, DEFAULT_DIR))
    directory.mkdir(mode=0o777, parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    while True:
        allocator = _lock(directory / "allocator", blocking=True)
        try:
            got = _try_take(directory, count, total_gpus, slots_per_gpu, slots_each)
        finally:
            _release([allocator])
        if got is not None:
            break
        if time.monotonic() > deadline:
            raise LeaseError(f"no {count} free GPU(s) of {total_gpus} within {timeout:.0f} s")
        time.sleep(POLL_SECONDS)
    gpus, fds = got
    for fd in fds:  # who holds what, for humans and the lease self-test
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {holder}\n".encode(), 0)
    try:
        yield Lease(gpus, lease_env(gpus, slots_per_gpu, slots_each))
    finally:
        _release(fds)
