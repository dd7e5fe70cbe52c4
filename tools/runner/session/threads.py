"""CPU thread budget of a test process, so tests running side by side share the host's cores.

Unbounded, every torch process starts one intra-op thread per core and inductor one compile
worker per core, so tests running side by side oversubscribe the host many times over.
Bazel 4.2.3 does not tell a test how many tests run beside it (--local_test_jobs is not in its
environment), so the runner counts them: every runner holds
an flock on a file of its own in a host-wide directory (the kernel drops it when the process
dies, so crashed tests never count), and the number of held files is the number of tests
running now. The budget is re-taken before every test case, since peers start and finish:

  intra-op threads (torch.set_num_threads; OMP_NUM_THREADS for rank processes it starts):
      ceil(cores / sharing tests), at least MIN_THREADS; cores are physical ones, as torch
      counts them for its default, so a test running alone gets torch's default
  sharing tests: the tests running now; for a case with a recorded duration D, only those
      expected to still run at its midpoint (D / 2 from now)
  inductor compile workers (TORCHINDUCTOR_COMPILE_THREADS, torch._inductor.config):
      1 once other tests have been seen running (a worker pool per test multiplies
      processes); inductor's default for a test that runs alone. A long case's midpoint
      share of workers was tried and did not make the suite faster (a pool first starts a
      process of its own that imports torch): bench/results/host_suite_2026-11-27_nvidia-h100-x1.md

Why the midpoint: the count is fixed for the whole case (changing it mid-case would change how
CPU reductions split between a case's reference and compiled computations), and a long case that
starts beside many short ones keeps their count after they end, while most of the host's
cores sit idle (bench/host_suite.py's runner lines show it). Each process publishes, in its
registry file, the recorded seconds of its cases not yet finished (its spec's durations, from
tools/test_times.bzl): from registration on, what the record puts in its shard, since every
test of a suite registers at once and collects for seconds before its first case; from
collection on, what its selection has left, an unrecorded case counted as sharding's
UNKNOWN_DURATION. A test of a target with no record publishes nothing and counts as sharing
throughout, and a case without a record counts every running test: without records the budget
is the count of tests running now.

MIN_THREADS is 2: on the 2-core host one intra-op thread per test made the CPU suite slower
(its longest test runs alone at the end). A value the user sets (--test_env=OMP_NUM_THREADS=N,
--test_env=TORCHINDUCTOR_COMPILE_THREADS=N) is left alone.

Environment:
  TORCH_TEST_JOBS_DIR        registry directory (default /dev/shm/torch_test_jobs, writable in
                             Bazel's sandbox and shared by all tests on the host)
  TORCH_TEST_THREAD_FORECAST "off": count the tests running now only (bench/'s before and after)
"""

import contextlib
import fcntl
import math
import os
import pathlib
import sys
import tempfile

from tools.hardware import envvars
from tools.runner.process import lifetime
from tools.runner.session import sharding

DEFAULT_DIR = "/dev/shm/torch_test_jobs"
MIN_THREADS = 2
USER_KNOBS = ("OMP_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS")
STAGING = ".staging-"


# Registry files hold the seconds a test still expects to run, fixed width so a reader never
# sees a shorter number mid-write; blank while unknown.
REMAINING_WIDTH = 24


def budget(cores: int, running: int, sharing: int | None = None) -> tuple[int, int | None]:
    """(intra-op threads, compile workers or None for inductor's default) for one test.

    `running`: tests running now; `sharing`: those expected to share the cores through the
    case (default: all running ones).
    """
    running = max(1, running)
    sharing = running if sharing is None else max(1, min(sharing, running))
    intra = min(cores, max(MIN_THREADS, math.ceil(cores / sharing)))
    return intra, (1 if running > 1 else None)


def sharing_midway(case_seconds: float | None, others: list[float | None]) -> int:
    """This test and the others expected to still run halfway through a case of `case_seconds`.

    `others`: each other running test's recorded seconds left, None where unknown (counted).
    """
    if case_seconds is None:
        return 1 + len(others)
    return 1 + sum(1 for left in others if left is None or left > case_seconds / 2)


def remaining_seconds(order: list[str], durations: dict[str, float]) -> list[float | None]:
    """For each position of `order`, the recorded seconds of it and every case after it.

    None throughout where the target has no record.
    """
    if not durations:
        return [None] * len(order)
    left, total = [], 0.0
    for node_id in reversed(order):
        total += durations.get(node_id, sharding.UNKNOWN_DURATION)
        left.append(total)
    return left[::-1]


def _cores() -> int:
    """Physical cores this process may run on: torch's own default intra-op thread count."""
    cpus = os.sched_getaffinity(0)
    siblings = set()
    for cpu in cpus:
        topology = pathlib.Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            siblings.add(topology.read_text().strip())
        except OSError:
            return len(cpus)
    return len(siblings) or len(cpus)


def running_tests(directory: pathlib.Path) -> int:
    """Test processes holding their registry file now; files of dead ones are removed."""
    return len(running_remaining(directory))


def _published(path: pathlib.Path) -> float | None:
    try:
        return float(path.read_bytes()[:REMAINING_WIDTH])
    except (OSError, ValueError):
        return None  # blank (unknown), or unreadable


def running_remaining(directory: pathlib.Path, own: pathlib.Path | None = None) -> list:
    """The seconds each live test (but `own`) has published it still runs, None if unknown."""
    found = []
    for path in directory.iterdir():
        if path.name.startswith(STAGING):
            continue
        try:
            held = lifetime.is_held(path)
        except FileNotFoundError:
            continue  # removed by another counter
        except PermissionError:
            found.append(None)  # another user's test (registrations are readable; assume it lives)
            continue
        if not held:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        elif path != own:
            found.append(_published(path))  # a live test
    return found


class ThreadBudget:
    """pytest plugin: applies the budget before every test case."""

    def __init__(self, directory: pathlib.Path, env, log=sys.stderr, export=None, durations=None):
        self.directory, self.env, self.log = directory, env, log
        # Where the budget goes for the processes the test starts: the runner decides.
        self.export = export or env.update
        self.fixed = {k for k in USER_KNOBS if env.get(k)}
        self.cores = _cores()  # fixed for the process; apply() runs before every test
        self.last = None
        self.durations = durations or {}
        self.forecast = env.get(envvars.THREAD_FORECAST) != "off"
        self.own: pathlib.Path | None = None  # this process's registry file
        self.fd: int | None = None
        self.left: dict[str, float | None] = {}  # node id -> recorded seconds from it to the end

    @classmethod
    def start(cls, env, export=None, durations=None, expected=None) -> "ThreadBudget":
        """Registers this process; `export` receives the budget for the processes it starts.

        `durations`: the target's recorded seconds per node id (sharding.load_durations);
        `expected`: the recorded seconds of this shard, published until collection ends.
        """
        directory = pathlib.Path(env.get(envvars.JOBS_DIR, DEFAULT_DIR))
        directory.mkdir(mode=0o777, parents=True, exist_ok=True)
        with contextlib.suppress(PermissionError):
            directory.chmod(0o777)  # past the umask: every user's tests register here
        # Unique names: Bazel's sandboxes have PID namespaces, so PIDs repeat across tests.
        # Locked before it gets a counted name, so no counter mistakes it for a dead one.
        fd, staging = tempfile.mkstemp(prefix=STAGING, dir=directory)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until this process exits
        os.fchmod(fd, 0o644)  # other users' tests count it too
        own = staging.replace(STAGING, "test-", 1)
        os.rename(staging, own)
        # pytest captures fd 2 while a test runs; budget changes go to the real test log.
        log = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
        self = cls(directory, env, log, export, durations)
        self.own, self.fd = pathlib.Path(own), fd
        self.publish(expected)
        self.apply()
        return self

    def publish(self, seconds_left: float | None) -> None:
        """Writes what this test still expects to run where other tests' budgets read it."""
        if self.fd is not None:
            text = "" if seconds_left is None else f"{seconds_left:.3f}"
            os.pwrite(self.fd, text.ljust(REMAINING_WIDTH).encode(), 0)

    def apply(self, case_seconds: float | None = None) -> tuple[int, int, int | None]:
        others = running_remaining(self.directory, self.own)
        running = 1 + len(others)
        sharing = sharing_midway(case_seconds if self.forecast else None, others)
        intra, compile_threads = budget(self.cores, running, sharing)
        added = {}
        if "OMP_NUM_THREADS" not in self.fixed:
            added["OMP_NUM_THREADS"] = str(intra)
            torch = sys.modules.get("torch")
            if torch is not None and hasattr(torch, "set_num_threads"):
                torch.set_num_threads(intra)
        if "TORCHINDUCTOR_COMPILE_THREADS" not in self.fixed:
            if compile_threads is not None:
                added["TORCHINDUCTOR_COMPILE_THREADS"] = str(compile_threads)
                inductor = sys.modules.get("torch._inductor.config")
                if inductor is not None:
                    inductor.compile_threads = compile_threads
        self.export(added)
        now = (running, intra, compile_threads)
        if now != self.last:  # one line per change, for bench/ scripts and humans
            shown = {**self.env, **added}
            midway = f" ({sharing} through this case)" if sharing != running else ""
            print(
                f"torch_test threads: {running} test(s) running{midway} on {self.cores} cores: "
                f"intra-op {shown.get('OMP_NUM_THREADS')}, "
                f"compile workers {shown.get('TORCHINDUCTOR_COMPILE_THREADS', 'default')}",
                file=self.log,
            )
            self.last = now
        return now

    def pytest_collection_finish(self, session):  # the run order, once sharding has chosen
        order = [item.nodeid for item in session.items]
        self.left = dict(zip(order, remaining_seconds(order, self.durations), strict=True))
        self.publish(self.left[order[0]] if order else 0.0)

    def pytest_runtest_setup(self, item):
        self.publish(self.left.get(item.nodeid))
        self.apply(self.durations.get(item.nodeid))
