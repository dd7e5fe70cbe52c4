"""CPU thread budget of a test process, so tests running side by side share the host's cores.

Unbounded, every torch process starts one intra-op thread per core and inductor one compile
worker per core, so tests running side by side oversubscribe the host many times over.
Bazel 4.2.3 does not tell a test how many tests run beside it (--local_test_jobs is not in its
environment), so the runner counts them: every runner holds
an flock on a file of its own in a host-wide directory (the kernel drops it when the process
dies, so crashed tests never count), and the number of held files is the number of tests
running now. The budget is re-taken before every test case, since peers start and finish:

  intra-op threads (torch.set_num_threads; OMP_NUM_THREADS for rank processes it starts):
      ceil(cores / running tests), at least MIN_THREADS; cores are physical ones, as torch
      counts them for its default, so a test running alone gets torch's default
  inductor compile workers (TORCHINDUCTOR_COMPILE_THREADS, torch._inductor.config):
      1 once other tests have been seen running (a worker pool per test multiplies
      processes); inductor's default for a test that runs alone

MIN_THREADS is 2: on the 2-core host one intra-op thread per test made the CPU suite slower
(its longest test runs alone at the end). A value the user sets (--test_env=OMP_NUM_THREADS=N,
--test_env=TORCHINDUCTOR_COMPILE_THREADS=N) is left alone.

Environment:
  TORCH_TEST_JOBS_DIR   registry directory (default /dev/shm/torch_test_jobs, writable in
                        Bazel's sandbox and shared by all tests on the host)
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

DEFAULT_DIR = "/dev/shm/torch_test_jobs"
MIN_THREADS = 2
USER_KNOBS = ("OMP_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS")
STAGING = ".staging-"


def budget(cores: int, running: int) -> tuple[int, int | None]:
    """(intra-op threads, compile workers or None for inductor's default) for one test."""
    running = max(1, running)
    intra = min(cores, max(MIN_THREADS, math.ceil(cores / running)))
    return intra, (1 if running > 1 else None)


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
    count = 0
    for path in directory.iterdir():
        if path.name.startswith(STAGING):
            continue
        try:
            held = lifetime.is_held(path)
        except FileNotFoundError:
            continue  # removed by another counter
        except PermissionError:
            count += 1  # another user's test (registrations are readable; assume it lives)
            continue
        if held:
            count += 1  # a live test (or this one, through its own descriptor)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return count


class ThreadBudget:
    """pytest plugin: applies the budget before every test case."""

    def __init__(self, directory: pathlib.Path, env, log=sys.stderr, export=None):
        self.directory, self.env, self.log = directory, env, log
        # Where the budget goes for the processes the test starts: the runner decides.
        self.export = export or env.update
        self.fixed = {k for k in USER_KNOBS if env.get(k)}
        self.cores = _cores()  # fixed for the process; apply() runs before every test
        self.last = None

    @classmethod
    def start(cls, env, export=None) -> "ThreadBudget":
        """Registers this process; `export` receives the budget for the processes it starts."""
        directory = pathlib.Path(env.get(envvars.JOBS_DIR, DEFAULT_DIR))
        directory.mkdir(mode=0o777, parents=True, exist_ok=True)
        with contextlib.suppress(PermissionError):
            directory.chmod(0o777)  # past the umask: every user's tests register here
        # Unique names: Bazel's sandboxes have PID namespaces, so PIDs repeat across tests.
        # Locked before it gets a counted name, so no counter mistakes it for a dead one.
        fd, staging = tempfile.mkstemp(prefix=STAGING, dir=directory)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until this process exits
        os.fchmod(fd, 0o644)  # other users' tests count it too
        os.rename(staging, staging.replace(STAGING, "test-", 1))
        # pytest captures fd 2 while a test runs; budget changes go to the real test log.
        log = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
        self = cls(directory, env, log, export)
        self.apply()
        return self

    def apply(self) -> tuple[int, int, int | None]:
        running = running_tests(self.directory)
        intra, compile_threads = budget(self.cores, running)
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
            print(
                f"torch_test threads: {running} test(s) running on {self.cores} cores: "
                f"intra-op {shown.get('OMP_NUM_THREADS')}, "
                f"compile workers {shown.get('TORCHINDUCTOR_COMPILE_THREADS', 'default')}",
                file=self.log,
            )
            self.last = now
        return now

    def pytest_runtest_setup(self, item):
        self.apply()
