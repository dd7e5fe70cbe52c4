"""Self-tests of the multi-process harness (CPU, gloo).

Each test fails if its property breaks: results come back in rank order; every way a rank can
fail is reported, promptly, with the right rank named; skips propagate; and no process is left
behind (checked after every test by listing this process's descendants in /proc).
Rank functions live at module level so that they pickle.
"""

import importlib
import multiprocessing
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import pytest
import torch
import torch.distributed as dist
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

from test_utils import distributed, rank_process
from test_utils.distributed import RankFailure, run_ranks, single_process_group
from test_utils.dtensor import DTensorTestCase, with_comms
from test_utils.multiprocess_testcase import MultiProcessTestCase, per_rank
from tools.hardware import envvars, spec

HANG_TIMEOUT_S = 8.0
# Past the timeout: up to STACK_DUMP_WAIT_S for stack dumps, then kill and reap.
TIMEOUT_SLACK_S = distributed.STACK_DUMP_WAIT_S + 2.0
# A crash is seen at once; ranks stuck waiting on the crashed one get GRACE_S to report.
CRASH_DETECTION_S = distributed.GRACE_S + 3.0
PROCESS_EXIT_WAIT_S = 10.0


# ---------------------------------------------------------------------------------------------
# Processes


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) for every process on the host."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue  # exited while we looked
        table[int(entry)] = (int(fields[1]), fields[0])
    return table


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in _process_table().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pids) -> set[int]:
    """The pids still running (zombies count as gone: they only wait for their parent)."""
    table = _process_table()
    return {pid for pid in pids if pid in table and table[pid][1] != "Z"}


def _wait_until_gone(pids, timeout: float = PROCESS_EXIT_WAIT_S) -> set[int]:
    until = time.monotonic() + timeout
    while (left := _alive(pids)) and time.monotonic() < until:
        time.sleep(0.05)
    return left


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path, monkeypatch):
    if "TEST_TMPDIR" not in os.environ:  # plain pytest: keep failing runs' logs out of /tmp
        monkeypatch.setenv("TEST_TMPDIR", str(tmp_path))
    # The default start method is under test (some tests count its helper processes).
    monkeypatch.delenv(envvars.START_METHOD, raising=False)
    # The forkserver (and multiprocessing's resource tracker) live as long as this process;
    # start them first so they are part of the baseline, and so that their one-time torch
    # import is not inside any test's timing.
    distributed.warm_up()
    before = _descendants(os.getpid())
    yield
    until = time.monotonic() + PROCESS_EXIT_WAIT_S
    while (extra := _descendants(os.getpid()) - before) and time.monotonic() < until:
        time.sleep(0.05)
    assert not extra, f"processes left behind: {sorted(extra)}"


# ---------------------------------------------------------------------------------------------
# Rank functions


def _rank_identity(offset):
    total = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(total)
    return dist.get_rank(), dist.get_world_size(), total.item() + offset, os.environ.get("PROBE")


def _raise_on_rank_one():
    if dist.get_rank() == 1:
        print("rank 1 is about to fail")
        raise ValueError("boom from rank 1")
    return "ok"


def _exit_3_on_rank_one():
    if dist.get_rank() == 1:
        os._exit(3)
    dist.all_reduce(torch.ones(1))


def _sigkill_rank_zero():
    if dist.get_rank() == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(torch.ones(1))


def _sleep_forever():
    while True:
        time.sleep(0.5)


def _start_grandchild(pid_file: str) -> None:
    child = subprocess.Popen(["sleep", "600"])
    _write_atomically(pid_file, str(child.pid))


def _write_atomically(path: str, text: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def _hang_on_last_rank(pid_dir: str):
    rank = dist.get_rank()
    if rank == 0:
        return "finished"  # then waits in the harness's closing barrier
    if rank == dist.get_world_size() - 1:
        _start_grandchild(os.path.join(pid_dir, "grandchild"))
        _sleep_forever()
    dist.all_reduce(torch.ones(1))  # waits for the last rank forever


class _StallOnRank:
    """An argument whose unpickling hangs on one rank: the rank hangs before rendezvous."""

    def __init__(self, rank: int):
        self.rank = rank

    def __reduce__(self):
        return _stall_if_rank, (self.rank,)


def _stall_if_rank(rank: int):
    if os.environ["RANK"] == str(rank):
        _sleep_forever()


def _return_rank(_stall):
    return dist.get_rank()


def _record_pids_and_hang(pid_dir: str):
    rank = dist.get_rank()
    _start_grandchild(os.path.join(pid_dir, f"grandchild{rank}"))
    _write_atomically(os.path.join(pid_dir, f"rank{rank}"), str(os.getpid()))
    _sleep_forever()


def _wait_for_pid_files(pid_dir: str, count: int, driver=None) -> list[int]:
    """The pids the ranks wrote, once `count` are there; fails at once if `driver` ended."""
    # Ranks start after imports of torch (in a driver, then its forkserver), which a loaded host
    # stretches to minutes: the only bound is the test's own deadline.
    timeout = distributed.default_timeout()
    until = time.monotonic() + timeout
    while time.monotonic() < until and (driver is None or driver.poll() is None):
        names = [n for n in os.listdir(pid_dir) if not n.endswith(".tmp")]
        if len(names) >= count:
            return [int(pathlib.Path(pid_dir, n).read_text()) for n in names]
        time.sleep(0.05)
    ended = "" if driver is None else f" (driver exit code {driver.returncode})"
    raise AssertionError(f"ranks wrote {os.listdir(pid_dir)} within {timeout:.0f} s{ended}")


# ---------------------------------------------------------------------------------------------
# run_ranks


def test_returns_each_ranks_value_in_rank_order(monkeypatch):
    # Set after the forkserver started: ranks must still see the current environment.
    monkeypatch.setenv("PROBE", "from the test")
    assert run_ranks(_rank_identity, 2, backend="gloo", args=(10,)) == [
        (0, 2, 13.0, "from the test"),
        (1, 2, 13.0, "from the test"),
    ]


def _start_a_process():
    child = multiprocessing.get_context("fork").Process(target=os.getpid)
    child.start()
    child.join()
    return child.exitcode


def test_ranks_may_start_processes():
    # e.g. DataLoader workers: multiprocessing refuses children to daemonic processes.
    assert run_ranks(_start_a_process, 2, backend="gloo") == [0, 0]


def test_raising_rank_reports_its_traceback_and_output():
    start = time.monotonic()
    with pytest.raises(RankFailure) as failure:
        run_ranks(_raise_on_rank_one, 2, backend="gloo", timeout=60)
    assert time.monotonic() - start < CRASH_DETECTION_S
    message = str(failure.value)
    # Rank 1 is named first: rank 0 then fails or hangs in the closing barrier without it.
    first_line = message.splitlines()[0]
    assert "failed in _raise_on_rank_one: rank 1 raised ValueError: boom from rank 1" in first_line
    assert 'in _raise_on_rank_one\n    raise ValueError("boom from rank 1")' in message
    assert "rank 1 is about to fail" in message  # the rank's own output


def test_rank_exit_code_is_reported():
    start = time.monotonic()
    with pytest.raises(RankFailure, match="rank 1 exited with code 3"):
        run_ranks(_exit_3_on_rank_one, 2, backend="gloo", timeout=60)
    assert time.monotonic() - start < CRASH_DETECTION_S


def test_rank_killed_by_signal_is_reported():
    start = time.monotonic()
    with pytest.raises(RankFailure, match="rank 0 killed by SIGKILL"):
        run_ranks(_sigkill_rank_zero, 2, backend="gloo", timeout=60)
    assert time.monotonic() - start < CRASH_DETECTION_S


def test_hang_in_collective_times_out_with_stacks_and_kills_grandchildren(tmp_path):
    start = time.monotonic()
    with pytest.raises(RankFailure) as failure:
        run_ranks(_hang_on_last_rank, 3, backend="gloo", args=(str(tmp_path),), timeout=8.0)
    assert time.monotonic() - start < HANG_TIMEOUT_S + TIMEOUT_SLACK_S
    message = str(failure.value)
    sections = {s.split(":")[0]: s for s in message.split("===== ")[1:]}
    assert "rank 2 timed out after 8.0 s" in message
    assert "in _sleep_forever" in sections["rank 2"]
    assert "in all_reduce" in sections["rank 1"]
    assert "rank 0 timed out after 8.0 s (it had returned; stuck in shutdown)" in message
    assert rank_process.WATCHDOG_FUNCTION not in message  # the harness's own thread is noise
    grandchild = int((tmp_path / "grandchild").read_text())
    assert not _wait_until_gone({grandchild}), "a rank's child outlived it"


def test_hang_before_rendezvous_times_out():
    start = time.monotonic()
    with pytest.raises(RankFailure) as failure:
        run_ranks(_return_rank, 2, backend="gloo", args=(_StallOnRank(1),), timeout=8.0)
    assert time.monotonic() - start < HANG_TIMEOUT_S + TIMEOUT_SLACK_S
    message = str(failure.value)
    sections = {s.split(":")[0]: s for s in message.split("===== ")[1:]}
    assert "rank 1 timed out after 8.0 s" in message
    assert "in _stall_if_rank" in sections["rank 1"]
    assert "in init_process_group" in sections["rank 0"]  # waiting for rank 1 to rendezvous


def test_keyboard_interrupt_kills_every_rank(tmp_path):
    # The runner turns Bazel's SIGTERM into KeyboardInterrupt in the main thread.
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    pids = []

    def interrupt_once_ranks_run():
        try:
            pids.extend(_wait_for_pid_files(str(pid_dir), 4))
        finally:
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupter = threading.Thread(target=interrupt_once_ranks_run, daemon=True)
    try:
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            run_ranks(_record_pids_and_hang, 2, backend="gloo", args=(str(pid_dir),), timeout=30)
        interrupter.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(pids) == 4, "ranks did not start"
    assert not _wait_until_gone(pids), "ranks or their children outlived the interrupt"


@pytest.fixture
def driver_env():
    """Environment for a child Python acting as a test process: our sys.path, and a private
    TMPDIR for multiprocessing's sockets (a killed driver cannot remove them itself)."""
    tmpdir = tempfile.mkdtemp(prefix="driver-")  # short: AF_UNIX paths are limited to 108 bytes
    yield dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), TMPDIR=tmpdir)
    shutil.rmtree(tmpdir, ignore_errors=True)


_DRIVER = """
import importlib, sys
from test_utils import distributed
distributed.FORKSERVER_PRELOAD = (*sys.argv[3:], *distributed.FORKSERVER_PRELOAD)
tests = importlib.import_module(sys.argv[1])
hang = tests._record_pids_and_hang
distributed.run_ranks(hang, 2, backend="gloo", args=(sys.argv[2],), timeout=120)
"""

# Stands for the exit work of what the forkserver preloads (torch's atexit handlers and
# teardown: CPU work a loaded host stretches past any wait). Preloaded first, so it is the
# last exit work an interpreter would do: the server must end without doing it.
_SLOW_EXIT = "import atexit, time\natexit.register(time.sleep, 600)\n"


def test_ranks_die_when_the_test_process_is_killed(tmp_path, driver_env):
    # SIGKILL leaves no `finally`: the forkserver, PDEATHSIG and the ranks' watchdog must clean
    # up, and the forkserver must end without its exit work (here 600 s of it).
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    (tmp_path / "slow_exit.py").write_text(_SLOW_EXIT)
    driver_env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    command = [sys.executable, "-c", _DRIVER, __name__, str(pid_dir), "slow_exit"]
    with (tmp_path / "driver.log").open("w") as log:
        driver = subprocess.Popen(command, env=driver_env, stderr=log)
    try:
        _wait_for_pid_files(str(pid_dir), 4, driver)
        tree = _descendants(driver.pid)  # forkserver, resource tracker, ranks, grandchildren
    finally:
        driver.kill()
        driver.wait()
    assert len(tree) >= 6, tree
    assert not _wait_until_gone(tree), "processes outlived the killed test process"


_EXITING_DRIVER = """
import os
from test_utils import distributed
distributed.warm_up()
print(" ".join(str(pid) for pid in distributed_children(os.getpid())))
"""


def test_forkserver_ends_with_the_test_process(tmp_path, driver_env):
    out = tmp_path / "children"
    code = f"from {__name__} import _descendants as distributed_children\n" + _EXITING_DRIVER
    with out.open("w") as stdout:
        subprocess.run([sys.executable, "-c", code], env=driver_env, stdout=stdout, check=True)
    helpers = {int(pid) for pid in out.read_text().split()}  # forkserver, resource tracker
    assert len(helpers) == 2, helpers
    assert not _wait_until_gone(helpers, timeout=0.5), "helpers outlived the test process"


def test_warm_up_refuses_a_forkserver_whose_exit_is_not_armed(monkeypatch):
    # The forkserver ignores a preload's ImportError, which once left its exit unarmed unseen;
    # warm_up runs this check in a process the server forked (its parent).
    from test_utils import distributed_server_exit as server_exit

    monkeypatch.setitem(sys.modules, distributed.SERVER_EXIT, None)  # its import failed
    with pytest.raises(SystemExit) as unarmed:
        distributed._check_server_exit()
    assert unarmed.value.code == distributed._SERVER_EXIT_UNARMED
    monkeypatch.setitem(sys.modules, distributed.SERVER_EXIT, server_exit)
    monkeypatch.setattr(server_exit, "_armed_pid", os.getpid())  # armed, in another process
    with pytest.raises(SystemExit):
        distributed._check_server_exit()
    monkeypatch.setattr(server_exit, "_armed_pid", os.getppid())
    distributed._check_server_exit()  # armed in its parent: goes on


# ---------------------------------------------------------------------------------------------
# MultiProcessTestCase and per_rank


class TestRankFields(MultiProcessTestCase):
    def setUp(self):
        super().setUp()
        # Runs in the ranks only: the process group exists here, not in the pytest process.
        self.rank_in_setup = dist.get_rank()

    @per_rank
    def test_fields_inside_a_rank(self):
        self.assertEqual(self.rank_in_setup, self.rank)
        self.assertEqual(self.rank, dist.get_rank())
        self.assertEqual(self.world_size, dist.get_world_size())
        self.assertEqual(self.world_size, 2)
        self.assertEqual(self.device, torch.device("cpu"))
        self.assertEqual(self.backend, "gloo")
        total = torch.ones(1, device=self.device)
        dist.all_reduce(total)
        self.assertEqual(total.item(), 2.0)


class TestWorldSizeOverride(MultiProcessTestCase):
    world_size = 3

    @per_rank
    def test_three_ranks(self):
        self.assertEqual(dist.get_world_size(), 3)


class _SkippingCase(MultiProcessTestCase):
    __test__ = False  # run by the tests below, which expect its skips

    @per_rank
    def test_unittest_skip_on_one_rank(self):
        if self.rank == 1:
            self.skipTest("needs a widget")

    @per_rank
    def test_pytest_skip(self):
        pytest.skip("not on this host")


class _FailingCase(MultiProcessTestCase):
    __test__ = False

    @per_rank
    def test_fails_on_rank_one(self):
        self.assertEqual(self.rank, 0, "only rank 0 may pass")


@pytest.mark.parametrize(
    "method, reason",
    [("test_unittest_skip_on_one_rank", "rank 1: needs a widget"), ("test_pytest_skip", "not on")],
)
def test_skip_in_a_rank_skips_the_test(method, reason):
    case = _SkippingCase(method)
    with pytest.raises(unittest.SkipTest, match=reason):
        getattr(case, method)()


def test_failing_assertion_in_a_rank_is_reported():
    with pytest.raises(RankFailure) as failure:
        _FailingCase("test_fails_on_rank_one").test_fails_on_rank_one()
    message = str(failure.value)
    assert "rank 1 failed: AssertionError: 1 != 0 : only rank 0 may pass" in message
    assert "in test_fails_on_rank_one" in message


# ---------------------------------------------------------------------------------------------
# DTensor and single-process groups


class TestDTensorHarness(DTensorTestCase):
    @with_comms
    def test_shard_and_replicate_over_four_ranks(self):
        self.assertEqual(self.world_size, 4)
        self.assertEqual(dist.get_world_size(), 4)
        mesh = self.build_device_mesh()
        self.assertEqual(mesh.size(), 4)
        full = torch.arange(8.0)
        sharded = distribute_tensor(full, mesh, [Shard(0)])
        self.assertEqual(
            sharded.to_local().tolist(), full[2 * self.rank : 2 * self.rank + 2].tolist()
        )
        doubled = (sharded * 2).redistribute(mesh, [Replicate()]).to_local()
        self.assertEqual(doubled.tolist(), (full * 2).tolist())


def test_single_process_group():
    model = torch.nn.Linear(2, 2)
    with single_process_group("gloo") as device:
        assert device == torch.device("cpu")
        assert dist.get_world_size() == 1 and dist.get_rank() == 0
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        ddp(torch.ones(3, 2)).sum().backward()
        assert model.weight.grad is not None
    assert not dist.is_initialized()


# ---------------------------------------------------------------------------------------------
# default_timeout


def test_default_timeout_without_bazel(monkeypatch):
    monkeypatch.delenv("TEST_TIMEOUT", raising=False)
    monkeypatch.delenv(envvars.RUNTIME, raising=False)
    assert distributed.default_timeout() == distributed.MAX_TIMEOUT_S


def test_default_timeout_stays_inside_bazels(monkeypatch, tmp_path):
    # The runner's deadline already leaves Bazel its margin: the harness uses it as it is, and
    # does not derive a second one from TEST_TIMEOUT.
    def deadline(seconds):
        monkeypatch.setenv(*spec.Runtime(deadline=seconds).env().popitem())

    monkeypatch.delenv(envvars.RUNTIME, raising=False)
    monkeypatch.setenv("TEST_TIMEOUT", "250")
    assert distributed.default_timeout() == distributed.MAX_TIMEOUT_S
    deadline(time.time() + 100000)
    assert distributed.default_timeout() == distributed.MAX_TIMEOUT_S
    deadline(time.time() + 30)
    assert 30 - 1 < distributed.default_timeout() <= 30
    deadline(time.time() - 5)  # already late
    assert distributed.default_timeout() == distributed.MIN_TIMEOUT_S


def test_this_module_is_importable_by_name():
    # Ranks (and the driver above) import this module by name, from the parent's sys.path.
    assert importlib.import_module(__name__).__file__ == __file__
