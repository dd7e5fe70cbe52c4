"""Self-tests of the GPU lease (tools/runner/gpu_lease.py) with simulated GPUs.

Holders run in separate processes, as Bazel's parallel tests do, and log when they held which
GPUs; the log must show no GPU held by two holders at once. Where threads stand for holders,
each lease opens its own lock files, and flock()s of separate opens exclude each other even
within one process.
"""

import collections
import contextlib
import functools
import multiprocessing
import os
import pathlib
import signal
import threading
import time

import pytest

from tools.hardware.spec import Spec
from tools.runner import gpu_lease, gpu_share

TOTAL_GPUS = 2


def _hold(lease_dir, count, seconds, log_path):
    os.environ["TORCH_TEST_GPU_LEASE_DIR"] = lease_dir
    with gpu_lease.lease(count, TOTAL_GPUS, timeout=60, holder=f"holder-{os.getpid()}") as held:
        gpus = held.gpus
        start = time.monotonic()
        assert held.env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, gpus))
        time.sleep(seconds)
        end = time.monotonic()
    with open(log_path, "a") as log:
        log.write(f"{os.getpid()} {','.join(map(str, gpus))} {start} {end}\n")


def _intervals(log_path):
    rows = []
    for line in open(log_path).read().splitlines():
        pid, gpus, start, end = line.split()
        rows.append((pid, [int(g) for g in gpus.split(",")], float(start), float(end)))
    return rows


@pytest.fixture
def lease_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TEST_GPU_LEASE_DIR", str(tmp_path / "lease"))
    return str(tmp_path / "lease")


def test_concurrent_mixed_requests_never_overlap_and_all_finish(lease_dir, tmp_path):
    log = str(tmp_path / "holders.log")
    ctx = multiprocessing.get_context("spawn")
    counts = [1, 2, 1, 1, 2, 1, 2, 1]  # mixed 1- and 2-GPU requests: no deadlock allowed
    procs = [ctx.Process(target=_hold, args=(lease_dir, c, 0.3, log)) for c in counts]
    started = time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=90)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    assert time.monotonic() - started < 90

    rows = _intervals(log)
    assert sorted(len(g) for _, g, _, _ in rows) == sorted(counts)
    for gpu in range(TOTAL_GPUS):
        spans = sorted((s, e) for _, gpus, s, e in rows if gpu in gpus)
        for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False):
            assert end <= next_start, f"GPU {gpu} held twice at once: {spans}"


def _hold_until_killed(lease_dir, count, holding_path):
    os.environ["TORCH_TEST_GPU_LEASE_DIR"] = lease_dir
    with gpu_lease.lease(count, TOTAL_GPUS, timeout=60):
        pathlib.Path(holding_path).touch()
        time.sleep(600)


def test_killed_holder_frees_its_gpus(lease_dir, tmp_path):
    # The holder says when it holds; probing with leases of our own could starve it.
    holding = tmp_path / "holding"
    ctx = multiprocessing.get_context("spawn")
    holder = ctx.Process(target=_hold_until_killed, args=(lease_dir, 2, str(holding)))
    holder.start()
    try:
        deadline = time.monotonic() + 40
        while not holding.exists():
            assert holder.is_alive() and time.monotonic() < deadline, "holder never got the GPUs"
            time.sleep(0.05)
        with pytest.raises(gpu_lease.LeaseError):
            with gpu_lease.lease(1, TOTAL_GPUS, timeout=0):
                pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.join()
    started = time.monotonic()
    with gpu_lease.lease(2, TOTAL_GPUS, timeout=10) as held:
        assert held.gpus == [0, 1]
    assert time.monotonic() - started < 2


def test_request_larger_than_host_fails_with_counts(lease_dir):
    with pytest.raises(gpu_lease.LeaseError, match="needs 2 GPUs, found 1"):
        with gpu_lease.lease(2, 1, timeout=1):
            pass
    # It would never get its turn, and as the oldest waiter it would hold up every other test.
    with pytest.raises(gpu_lease.LeaseError, match="needs 3 slots of a GPU, which has 2"):
        with gpu_lease.lease(1, 1, timeout=1, slots_per_gpu=2, slots_each=3):
            pass


def test_waiting_for_busy_gpus_times_out(lease_dir):
    with gpu_lease.lease(2, TOTAL_GPUS, timeout=1):
        started = time.monotonic()
        with pytest.raises(gpu_lease.LeaseError, match="no 1 free GPU"):
            with gpu_lease.lease(1, TOTAL_GPUS, timeout=0.5):
                pass
        assert time.monotonic() - started < 5


def test_slots_spread_then_share_gpus(lease_dir):
    shared = functools.partial(gpu_lease.lease, slots_per_gpu=2)
    with contextlib.ExitStack() as held:
        first = held.enter_context(shared(1, 2, timeout=1))
        second = held.enter_context(shared(1, 2, timeout=1))
        assert (first.gpus, second.gpus) == ([0], [1]), "idle GPUs are taken before sharing"
        both = held.enter_context(shared(2, 2, timeout=1))
        assert both.gpus == [0, 1], "a 2-GPU test takes the second slot of each GPU"
        with pytest.raises(gpu_lease.LeaseError):  # every slot is taken now
            with shared(1, 2, timeout=0.3):
                pass
    with shared(2, 2, timeout=1) as again:  # all released on exit
        assert again.gpus == [0, 1]


def test_a_whole_gpu_lease_excludes_shared_ones(lease_dir):
    whole = {"slots_per_gpu": 2, "slots_each": 2}
    shared = {"slots_per_gpu": 2, "slots_each": 1}
    with gpu_lease.lease(1, 1, timeout=5, **shared) as part:
        # The lease only locks: the share's memory cap is the sharing decision's (gpu_share.py).
        assert part.env == {"CUDA_VISIBLE_DEVICES": "0"}
        with gpu_lease.lease(1, 1, timeout=5, **shared):  # two shares fit on one GPU
            with pytest.raises(gpu_lease.LeaseError):
                gpu_lease.lease(1, 1, timeout=0.5, **shared).__enter__()
        with pytest.raises(gpu_lease.LeaseError):  # one share is taken: no whole GPU
            gpu_lease.lease(1, 1, timeout=0.5, **whole).__enter__()
    with gpu_lease.lease(1, 1, timeout=5, **whole) as all_of_it:
        assert all_of_it.env == {"CUDA_VISIBLE_DEVICES": "0"}
        with pytest.raises(gpu_lease.LeaseError):
            gpu_lease.lease(1, 1, timeout=0.5, **shared).__enter__()


SLOTS = 4  # slots per simulated GPU in the queue's tests
small = functools.partial(gpu_lease.lease, 1, TOTAL_GPUS, slots_per_gpu=SLOTS, slots_each=1)
whole = functools.partial(gpu_lease.lease, 1, TOTAL_GPUS, slots_per_gpu=SLOTS, slots_each=SLOTS)


def _queue(lease_dir) -> list[pathlib.Path]:
    queue = pathlib.Path(lease_dir) / "waiters"
    return sorted(queue.iterdir()) if queue.is_dir() else []


def _wait_until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.02)


def _take_whole_in_thread(outcome: dict, timeout: float, release=None) -> threading.Thread:
    """A whole-GPU request in a thread: records its GPUs and wait, or its LeaseError."""

    def take():
        started = time.monotonic()
        try:
            with whole(timeout=timeout) as held:
                outcome.update(gpus=held.gpus, waited=time.monotonic() - started)
                if release is not None:
                    release.wait(30)
        except gpu_lease.LeaseError as error:
            outcome["error"] = error

    thread = threading.Thread(target=take)
    thread.start()
    return thread


def test_a_whole_gpu_request_is_not_starved_by_small_ones(lease_dir):
    # Four 1-slot holders, each new one taken before the oldest is let go, one at a time: placed
    # on the least busy GPU they keep at least one slot of each GPU held at every instant, so
    # without the head's reservation the whole-GPU request never finds a GPU free, however the
    # host schedules the threads.
    holders = collections.deque()

    def take_small():
        stack = contextlib.ExitStack()
        with contextlib.suppress(gpu_lease.LeaseError):  # the free GPU may be full: retried
            stack.enter_context(small(timeout=0.5))
            holders.append(stack)

    for _ in range(4):
        take_small()
    assert len(holders) == 4
    outcome = {}
    waiting = _take_whole_in_thread(outcome, timeout=10)
    turns = 0
    try:
        while waiting.is_alive():
            take_small()
            if holders:
                holders.popleft().close()
            turns += 1
            time.sleep(0.01)
    finally:
        waiting.join()
        for stack in holders:
            stack.close()
    assert "gpus" in outcome, f"starved while small tests took {turns} turns: {outcome}"
    assert _queue(lease_dir) == [], "the head leaves the queue with its lease"


def test_while_the_head_waits_newer_requests_fill_other_gpus(lease_dir):
    one_slot = contextlib.ExitStack()
    assert one_slot.enter_context(small(timeout=1)).gpus == [0]  # GPU 0: 3 of 4 slots free
    two_slots = functools.partial(gpu_lease.lease, 1, TOTAL_GPUS, slots_per_gpu=SLOTS)
    outcome, release = {}, threading.Event()
    with two_slots(timeout=1, slots_each=2) as pair:  # GPU 1: 2 free
        assert pair.gpus == [1]
        waiting = _take_whole_in_thread(outcome, timeout=20, release=release)
        try:
            _wait_until(lambda: len(_queue(lease_dir)) == 1, 10, "the whole request waits")
            # GPU 0 has the most free slots, so the head reserves it: the newer request goes
            # to GPU 1 at once, and one that fits only on GPU 0 waits.
            with small(timeout=1) as backfill:
                assert backfill.gpus == [1], "took the head's reserved GPU"
            with pytest.raises(gpu_lease.LeaseError):
                with two_slots(timeout=0.5, slots_each=3):
                    pass
            one_slot.close()  # GPU 0 is free: the head's turn
            _wait_until(lambda: "gpus" in outcome or "error" in outcome, 10, "the head's lease")
            assert outcome.get("gpus") == [0], outcome
            assert _queue(lease_dir) == []
        finally:
            release.set()
            one_slot.close()
            waiting.join()


def test_a_shared_head_reserves_its_slots_not_its_gpus(lease_dir):
    # A 2-GPU test that needs 2 slots of each waits for GPU 0: the two slots it needs there and
    # on GPU 1 are its own, the rest of GPU 1 is anyone's. Reserving whole GPUs for such a
    # test held every other test back until it ran.
    slots = functools.partial(gpu_lease.lease, slots_per_gpu=SLOTS)
    three = contextlib.ExitStack()
    assert three.enter_context(slots(1, TOTAL_GPUS, timeout=1, slots_each=3)).gpus == [0]
    outcome, release = {}, threading.Event()

    def take_pair():
        with slots(2, TOTAL_GPUS, timeout=20, slots_each=2) as held:
            outcome["gpus"] = held.gpus
            release.wait(30)

    waiting = threading.Thread(target=take_pair)
    waiting.start()
    try:
        _wait_until(lambda: len(_queue(lease_dir)) == 1, 10, "the 2-GPU request waits")
        with slots(1, TOTAL_GPUS, timeout=1, slots_each=2) as beside:  # GPU 1: 4 free, 2 its
            assert beside.gpus == [1], "the head's GPUs were reserved whole"
            with pytest.raises(gpu_lease.LeaseError):  # would take one of the head's slots
                with slots(1, TOTAL_GPUS, timeout=0.5, slots_each=1):
                    pass
        three.close()
        _wait_until(lambda: "gpus" in outcome, 10, "the head's lease")
        assert outcome["gpus"] == [0, 1]
    finally:
        release.set()
        three.close()
        waiting.join()


def test_a_patient_whole_request_lets_shared_ones_pass_then_reserves(lease_dir):
    # On a 2xH100 host a 1-second probe that needed both GPUs whole became the head and held
    # every test with a measured share back for ~160 s while the GPUs drained. A patient
    # request reserves nothing until its patience ends, then it is the head as before.
    with small(timeout=1) as first, small(timeout=1) as second:
        assert sorted(first.gpus + second.gpus) == [0, 1]  # a slot of each GPU is held
        outcome, patience = {}, 1.5  # both GPUs whole, as a 2-GPU probe with no peak

        def take():
            with gpu_lease.lease(
                2, TOTAL_GPUS, timeout=20, slots_per_gpu=SLOTS, slots_each=SLOTS, patience=patience
            ) as held:
                outcome["gpus"] = held.gpus

        waiting = threading.Thread(target=take)
        started = time.monotonic()
        waiting.start()  # gets its GPUs once the two holders leave, whatever happens here
        _wait_until(lambda: len(_queue(lease_dir)) == 1, 10, "the whole request waits")
        with small(timeout=0.3):  # patient: it reserves no GPU yet
            assert time.monotonic() - started < patience, "too slow to test patience"
        time.sleep(max(0.0, patience - (time.monotonic() - started)) + 0.3)
        with pytest.raises(gpu_lease.LeaseError):  # the head now: its GPUs are reserved
            with small(timeout=0.5):
                pass
    waiting.join(timeout=30)
    assert outcome.get("gpus") == [0, 1], outcome
    assert _queue(lease_dir) == []


def test_a_whole_request_waits_no_longer_than_its_run_time_behind_a_stream_of_shared_ones(
    lease_dir,
):
    # On 4 GPUs a 2-GPU probe with no recorded peak waited 223 s while shared tests kept
    # slotting in: its patience was half its wait. Now it is the probe's expected run time
    # (gpu_share.Decision.patience), after which it reserves its GPUs as the head.
    probe = gpu_share.decide(Spec(durations={"probe": 1.0}), {}, lambda: None)
    timeout = 30.0
    patience = probe.patience(timeout)
    assert not probe.shared and patience == 1.0
    stop = threading.Event()

    def stream() -> None:  # shared tests, one after another, on whichever GPU has room
        while not stop.is_set():
            with contextlib.suppress(gpu_lease.LeaseError):  # refused while the probe is head
                with small(timeout=0.5):
                    time.sleep(0.4)

    streams = [threading.Thread(target=stream) for _ in range(2 * SLOTS - 2)]
    for thread in streams:
        thread.start()
        time.sleep(0.4 / len(streams))  # staggered: some slot of each GPU is always held
    try:
        started = time.monotonic()
        with gpu_lease.lease(
            2,
            TOTAL_GPUS,
            timeout=timeout,
            slots_per_gpu=SLOTS,
            slots_each=SLOTS,  # whole, as decided
            patience=patience,
        ) as held:
            waited = time.monotonic() - started
            assert held.gpus == [0, 1]
    finally:
        stop.set()
        for thread in streams:
            thread.join()
    # Its patience, then the shared tests already on its GPUs end (0.4 s each).
    assert patience <= waited < patience + 2.0, waited


def test_the_oldest_waiter_goes_first(lease_dir):
    on_0, on_1 = contextlib.ExitStack(), contextlib.ExitStack()
    assert on_0.enter_context(small(timeout=1)).gpus == [0]
    assert on_1.enter_context(small(timeout=1)).gpus == [1]
    older, newer, releases = {}, {}, (threading.Event(), threading.Event())
    waiting = [_take_whole_in_thread(older, timeout=20, release=releases[0])]
    try:
        _wait_until(lambda: len(_queue(lease_dir)) == 1, 10, "the older waiter")
        waiting.append(_take_whole_in_thread(newer, timeout=20, release=releases[1]))
        _wait_until(lambda: len(_queue(lease_dir)) == 2, 10, "the newer waiter")
        on_1.close()
        _wait_until(lambda: older or newer, 10, "a waiter's lease")
        assert older.get("gpus") == [1] and not newer, (older, newer)
        releases[0].set()  # the newer one is the head now
        _wait_until(lambda: newer, 10, "the newer waiter's lease")
        assert newer.get("gpus") == [1], newer
    finally:
        for release in releases:
            release.set()
        on_0.close()
        on_1.close()
        for thread in waiting:
            thread.join()


def _wait_for_whole_gpu(lease_dir):
    os.environ["TORCH_TEST_GPU_LEASE_DIR"] = lease_dir
    with gpu_lease.lease(1, 1, timeout=600, slots_per_gpu=2, slots_each=2):
        pass


def test_a_killed_waiter_reserves_nothing(lease_dir):
    shared = functools.partial(gpu_lease.lease, 1, 1, slots_per_gpu=2, slots_each=1)
    with shared(timeout=1):
        waiter = multiprocessing.get_context("spawn").Process(
            target=_wait_for_whole_gpu, args=(lease_dir,)
        )
        waiter.start()
        try:
            _wait_until(lambda: len(_queue(lease_dir)) == 1, 40, "the whole request waits")
            with pytest.raises(gpu_lease.LeaseError):  # alive, it reserves the GPU's free slot
                with shared(timeout=0.5):
                    pass
        finally:
            os.kill(waiter.pid, signal.SIGKILL)
            waiter.join()
        assert len(_queue(lease_dir)) == 1, "a killed waiter cannot leave the queue itself"
        with shared(timeout=1):  # would time out on a dead waiter's reservation
            pass
        assert _queue(lease_dir) == [], "the dead waiter's entry is removed"
