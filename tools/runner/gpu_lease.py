"""GPU lease: lets Bazel run tests in parallel without oversubscribing GPUs.

Bazel 4.2.3 has no GPU resource accounting, so each GPU test process leases exactly its
variant's GPUs (tools/build_defs/variants.bzl) itself before it starts: one lock file per GPU
slot under a host-wide directory.

* All-or-nothing: slots are taken while holding one allocator lock, and released at once if
  not all are free; nobody ever waits while holding a slot, so there is no deadlock.
* A test takes `slots_each` of the `slots_per_gpu` slots of each GPU it uses, on the least
  busy GPUs; one that takes every slot has its GPUs to itself. How many, and what a slot is
  worth in memory, is the sharing decision's (tools/runner/gpu_share.py): the lease only locks.
* Locks are flock()s: the kernel frees them when the holder exits, even by SIGKILL.
* Waiters queue, and the oldest is not starved: polling alone never gives a request for whole
  GPUs its turn while small shared tests keep slotting in, since it needs every slot of its
  GPUs free at one poll. So a request that cannot be met at once enters the queue (a file
  waiters/<time_ns>-<pid> it holds flock'ed while it waits), and the oldest live waiter, the
  head, reserves the slots it needs on the GPUs that suit it best now (most free slots, then
  lowest index): any other request takes only the slots beyond them (backfill), so a GPU the
  head waits on never loses a free slot to a newer request, and the head's turn comes when the
  tests on it end. A head that needs whole GPUs reserves them whole; one that needs a few slots
  leaves the rest of its GPUs to others (reserving whole GPUs for it held every other test
  back behind one shared 4-GPU test). An entry whose flock is takeable is a dead waiter's
  (SIGKILL) and is removed by whoever sees it; the queue is read and joined only under the
  allocator lock, and a waiter holds no slot, so there is still no deadlock.
* A request may be patient (`patience` seconds): until then it reserves nothing and the next
  waiter is the head. A request for whole GPUs is patient for at most its expected run time
  (gpu_share.Decision.patience): as the head at once, a probe of a second that needed whole
  GPUs drained them and held every test with a measured share back for as long as the tests
  already on them ran (bench/results/multi_gpu_lease_2026-11-26_nvidia-h100-x2.md); patient
  for half its wait, it waited minutes behind a stream of shared tests. Its turn comes when the
  shared work leaves its GPUs free, or it reserves them once its patience ends.
* The lease returns the environment its holder's processes need to see the leased GPUs,
  CUDA_VISIBLE_DEVICES; the runner puts it in the environment it composes for the test.

Environment:
  TORCH_TEST_GPU_LEASE_DIR   lock directory (default /dev/shm/torch_test_gpu_lease, writable in
                             Bazel's sandbox and shared by all tests on the host): the
                             allocator lock, gpu<N>.slot<M> and the queue, waiters/
The runner waits for free GPUs until the test's deadline (the one of its harness timeouts).
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


def lease_dir(env=os.environ) -> pathlib.Path:
    """The host's lock folder (envvars.GPU_LEASE_DIR, else DEFAULT_DIR), made if missing and,
    if it is ours, open to every test of the host: a remote worker's sandboxed actions run
    without the capability to pass its permissions, and mkdir's mode is cut by the umask."""
    directory = pathlib.Path(env.get(envvars.GPU_LEASE_DIR, DEFAULT_DIR))
    directory.mkdir(parents=True, exist_ok=True)
    if directory.stat().st_uid == os.getuid():
        with contextlib.suppress(PermissionError):  # a read-only bind: as it is, then
            directory.chmod(0o777)
    return directory


@dataclasses.dataclass(frozen=True)
class Lease:
    gpus: list[int]
    env: dict[str, str]  # what the holder's processes need to know of the lease


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


def _least_busy(free: dict[int, int], count: int) -> list[int]:
    """The `count` GPUs with the most free slots, lowest index first among equals."""
    return sorted(free, key=lambda gpu: (-free[gpu], gpu))[:count]


def _try_take(
    directory: pathlib.Path,
    count: int,
    total_gpus: int,
    slots_per_gpu: int,
    each=1,
    head=(0, 0),
):
    """`each` free slots on each of `count` GPUs, least busy GPUs first, as (gpus, fds); else None.

    `head` (GPUs, slots on each) is what the head of the queue reserves: its slots on the GPUs
    that would suit it best are left out.
    Runs under the allocator lock: every free slot is locked while choosing, and all but the
    chosen ones are released before returning, so nothing is held when it returns None.
    """
    free = {}
    for gpu in range(total_gpus):
        slots = (_lock(directory / f"gpu{gpu}.slot{slot}", False) for slot in range(slots_per_gpu))
        free[gpu] = [fd for fd in slots if fd is not None]
    head_gpus, head_each = head
    counts = {gpu: len(fds) for gpu, fds in free.items()}
    reserved = _least_busy(counts, head_gpus)  # else large requests starve (see above)
    usable = {gpu: n - (head_each if gpu in reserved else 0) for gpu, n in counts.items()}
    fitting = {gpu: n for gpu, n in usable.items() if n >= each}
    chosen = sorted(_least_busy(fitting, count)) if len(fitting) >= count else []
    kept = [fd for gpu in chosen for fd in free[gpu][:each]]
    _release([fd for fds in free.values() for fd in fds if fd not in kept])
    return (chosen, kept) if chosen else None


def _join_queue(directory: pathlib.Path, count: int, each: int, patience: float):
    """Enters the queue (under the allocator lock, so no one sees an entry not yet locked)."""
    queue = directory / "waiters"
    queue.mkdir(mode=0o777, exist_ok=True)
    now = time.time_ns()
    path = queue / f"{now}-{os.getpid()}"
    fd = _lock(path, blocking=False)
    # What it waits for, what the head reserves, and from when (wall clock: other processes').
    os.write(fd, f"{count} {each} {now + int(patience * 1e9)}\n".encode())
    return path, fd


def _leave_queue(entry) -> None:
    path, fd = entry
    path.unlink(missing_ok=True)
    _release([fd])


def _head_need(directory: pathlib.Path, own) -> tuple[int, int]:
    """(GPUs, slots on each) the head of the queue reserves against this request: none if it
    is the head or none waits. The head is the oldest live waiter whose patience has ended.
    Under the allocator lock; removes dead waiters' entries."""
    queue = directory / "waiters"
    entries = list(queue.iterdir()) if queue.is_dir() else []
    now = time.time_ns()
    for path in sorted(entries, key=lambda path: tuple(map(int, path.name.split("-")))):
        if own and path == own[0]:
            return (0, 0)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # left the queue just now
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # alive: it holds its entry
            count, each, *since = os.pread(fd, 64, 0).split()
            if not since or int(since[0]) <= now:  # no time: an older runner's, at once
                return int(count), int(each)
        else:  # its waiter died without leaving
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return (0, 0)


@contextlib.contextmanager
def lease(
    count: int,
    total_gpus: int,
    *,
    timeout: float,
    holder: str = "",
    slots_per_gpu: int = 1,
    slots_each: int = 1,
    patience: float = 0.0,
    env=os.environ,
):
    """Hold `count` GPUs for the duration of the block; yields them and their Lease.env.

    `slots_each` slots of every chosen GPU (all `slots_per_gpu` of them: the GPUs whole); the
    sharing policy that picks them (TORCH_TEST_SLOTS_PER_GPU included) and the request's
    `patience` is tools/runner/gpu_share.py, whose decision the runner passes here.
    """
    if count > total_gpus:
        raise LeaseError(f"needs {count} GPUs, found {total_gpus}")
    if slots_each > slots_per_gpu:  # would wait forever, holding GPUs reserved as the head
        raise LeaseError(f"needs {slots_each} slots of a GPU, which has {slots_per_gpu}")
    directory = lease_dir(env)
    deadline = time.monotonic() + timeout
    queued = None  # (path, fd) of this request's entry once it has to wait
    try:
        while True:
            allocator = _lock(directory / "allocator", blocking=True)
            try:
                head = _head_need(directory, queued)
                got = _try_take(directory, count, total_gpus, slots_per_gpu, slots_each, head)
                if got is not None and queued is not None:  # the next oldest is the head now
                    _leave_queue(queued)
                    queued = None
                elif got is None and queued is None:
                    queued = _join_queue(directory, count, slots_each, patience)
            finally:
                _release([allocator])
            if got is not None:
                break
            if time.monotonic() > deadline:
                raise LeaseError(f"no {count} free GPU(s) of {total_gpus} within {timeout:.0f} s")
            time.sleep(POLL_SECONDS)
    finally:
        if queued is not None:  # timed out or interrupted
            _leave_queue(queued)
    gpus, fds = got
    for fd in fds:  # who holds what, for humans and the lease self-test
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {holder}\n".encode(), 0)
    try:
        yield Lease(gpus, {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))})
    finally:
        _release(fds)
