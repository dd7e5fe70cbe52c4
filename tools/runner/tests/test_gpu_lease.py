"""Self-tests of the GPU lease (tools/runner/gpu_lease.py) with simulated GPUs.

Holders run in separate processes, as Bazel's parallel tests do, and log when they held which
GPUs; the log must show no GPU held by two holders at once.
"""

import contextlib
import functools
import multiprocessing
import os
import pathlib
import signal
import time

import pytest

from tools.runner import gpu_lease

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


def test_waiting_for_busy_gpus_times_out(lease_dir):
    with gpu_lease.lease(2, TOTAL_GPUS, timeout=1):
        started = time.monotonic()
        with pytest.raises(gpu_lease.LeaseError, match="no 1 free GPU"):
            with gpu_lease.lease(1, TOTAL_GPUS, timeout=0.5):
                pass
        assert time.monotonic() - started < 5


def test_slots_spread_then_share_gpus_and_cap_memory(lease_dir):
    shared = functools.partial(gpu_lease.lease, slots_per_gpu=2)
    with contextlib.ExitStack() as held:
        first = held.enter_context(shared(1, 2, timeout=1))
        second = held.enter_context(shared(1, 2, timeout=1))
        assert (first.gpus, second.gpus) == ([0], [1]), "idle GPUs are taken before sharing"
        both = held.enter_context(shared(2, 2, timeout=1))
        assert both.gpus == [0, 1], "a 2-GPU test takes the second slot of each GPU"
        assert both.env["TORCH_TEST_GPU_MEMORY_FRACTION"] == "0.5000"
        with pytest.raises(gpu_lease.LeaseError):  # every slot is taken now
            with shared(1, 2, timeout=0.3):
                pass
    with shared(2, 2, timeout=1) as again:  # all released on exit
        assert again.gpus == [0, 1]


def test_a_whole_gpu_lease_excludes_shared_ones(lease_dir):
    whole = {"slots_per_gpu": 2, "slots_each": 2}
    shared = {"slots_per_gpu": 2, "slots_each": 1}
    with gpu_lease.lease(1, 1, timeout=5, **shared) as part:
        assert part.env["TORCH_TEST_GPU_MEMORY_FRACTION"] == "0.5000"
        with gpu_lease.lease(1, 1, timeout=5, **shared):  # two shares fit on one GPU
            with pytest.raises(gpu_lease.LeaseError):
                gpu_lease.lease(1, 1, timeout=0.5, **shared).__enter__()
        with pytest.raises(gpu_lease.LeaseError):  # one share is taken: no whole GPU
            gpu_lease.lease(1, 1, timeout=0.5, **whole).__enter__()
    with gpu_lease.lease(1, 1, timeout=5, **whole) as all_of_it:
        assert "TORCH_TEST_GPU_MEMORY_FRACTION" not in all_of_it.env
        with pytest.raises(gpu_lease.LeaseError):
            gpu_lease.lease(1, 1, timeout=0.5, **shared).__enter__()
