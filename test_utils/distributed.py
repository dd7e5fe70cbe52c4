"""Multi-process harness, parent side: run a function on N ranks, surface every rank's failure.

    run_ranks(fn, 2, backend="gloo")      -> [fn() on rank 0, fn() on rank 1]

What a rank does is in test_utils.rank_process; test methods that run in every rank
(MultiProcessTestCase, @per_rank) are in test_utils.multiprocess_testcase. Also here:
single_process_group, a world_size=1 group in the test process itself.

How a run works, and why:
- Ranks fork from a multiprocessing forkserver that imported torch once (FORKSERVER_PRELOAD).
  The server is exec'd, never forked from the test process, so it stays CUDA-free even after
  the test process used CUDA, and ranks skip the ~1-3 s torch import. TORCH_TEST_START_METHOD=
  spawn switches to fresh interpreters (slower; for comparison and debugging).
- Rendezvous goes through a FileStore in a fresh file; nothing here binds a port.
- Each rank leads its own process group, so one killpg also reaches its grandchildren (inductor
  compile workers). If the test process dies without cleaning up (SIGKILL), the forkserver
  kills every rank's group and exits at once, without tearing down its torch
  (test_utils.distributed_server_exit); a watchdog thread in each rank kills that group too,
  and PR_SET_PDEATHSIG kills the rank when the forkserver exits.
- Rank output goes to per-rank log files; SIGUSR1 makes a rank dump all its Python stacks.
- The parent watches reports and exits. After the first failure the other ranks get GRACE_S to
  report (they are often stuck in a collective with the dead rank); ranks still running then,
  or at the timeout, have their stacks dumped and are killed. Every rank is killed and reaped in
  a `finally`, so KeyboardInterrupt (the runner's SIGTERM) leaves no process behind; the
  forkserver is killed at exit (atexit) and otherwise exits when this process dies.

Environment read: the runner's deadline (its runtime record, tools/hardware/spec.py, used as
is), TEST_TMPDIR (rendezvous files), TEST_UNDECLARED_OUTPUTS_DIR (rank logs),
TORCH_TEST_START_METHOD. Ranks get a copy of
this process's os.environ at each run_ranks call, plus RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE and GLOO_SOCKET_IFNAME=lo (unless set). Environment variables that torch reads
at import time (e.g. TORCH_LOGS) only take effect in ranks if set before the first run.
"""

import atexit
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import re
import shutil
import signal
import sys
import tempfile
import time
import unittest

import torch
import torch.distributed as dist

from test_utils import rank_process
from tools.hardware import envvars, spec
from tools.runner.process import process_env

MAX_TIMEOUT_S = 300.0
MIN_TIMEOUT_S = 1.0
GRACE_S = 3.0
STACK_DUMP_WAIT_S = 2.0
REAP_WAIT_S = 10.0
LOG_TAIL_LINES = 40

START_METHODS = ("forkserver", "spawn")
SERVER_EXIT = "test_utils.distributed_server_exit"
# Imported once in the forkserver; every rank inherits them (~1 s of imports per rank saved).
FORKSERVER_PRELOAD = (
    "torch",
    "torch.distributed",
    "torch.distributed.tensor",
    "torch._dynamo",
    __name__,
    "test_utils.rank_process",
    "test_utils.multiprocess_testcase",
    SERVER_EXIT,  # last: its exit hook runs before those of every module above
)


class RankFailure(AssertionError):
    """One or more ranks failed; the message has each one's traceback, stack dump and output."""


# ---------------------------------------------------------------------------------------------
# Timeouts


def default_timeout() -> float:
    """Seconds a run may take: MAX_TIMEOUT_S, less if the runner's deadline is closer.

    The runner turns Bazel's TEST_TIMEOUT into one deadline (its runtime record's, epoch
    seconds) that already leaves its margin for stack dumps, kills and the report; it is used
    as is.
    """
    deadline = spec.runtime().deadline
    if deadline is None:
        return MAX_TIMEOUT_S
    return max(MIN_TIMEOUT_S, min(MAX_TIMEOUT_S, deadline - time.time()))


# ---------------------------------------------------------------------------------------------
# Where files go


def _scratch_root() -> str | None:
    """Parent folder for rendezvous files: Bazel's per-test tmpdir, else the system's."""
    return os.environ.get("TEST_TMPDIR") or None


def _log_root() -> tuple[str, bool]:
    """Folder for rank logs, and whether logs of passing runs are worth keeping there."""
    outputs = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
    if outputs:
        return os.path.join(outputs, "rank_logs"), True
    tmp = os.environ.get("TEST_TMPDIR")
    if tmp:
        return os.path.join(tmp, "tmp", "rank_logs"), True
    return tempfile.gettempdir(), False


def _label(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or "ranks"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]


# ---------------------------------------------------------------------------------------------
# Starting rank processes

_warm_contexts: set[str] = set()


def start_method() -> str:
    method = os.environ.get(envvars.START_METHOD, "forkserver")
    if method not in START_METHODS:
        raise ValueError(f"{envvars.START_METHOD}={method!r}; expected one of {START_METHODS}")
    return method


def warm_up() -> None:
    """Start the forkserver and wait until its imports are done.

    run_ranks calls this before its timeout starts, so the one-time import is not charged to
    the first test; tests may call it early to take it out of their own timing too.
    """
    _context()


def _context():
    method = start_method()
    ctx = multiprocessing.get_context(method)
    if method == "spawn" and method not in _warm_contexts:
        # The helper process multiprocessing starts with the first child: start it now too.
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
        _warm_contexts.add(method)
    if method == "forkserver" and method not in _warm_contexts:
        ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
        # NVML answers torch.cuda.is_available() if a preload asks; the CUDA runtime would
        # initialise the driver in the server, and CUDA does not survive fork.
        with process_env.while_starting("PYTORCH_NVML_BASED_CUDA_CHECK", "1"):
            probe = ctx.Process(target=_check_server_exit, name="forkserver-warm-up")
            probe.start()
        probe.join(default_timeout())
        if probe.exitcode == _SERVER_EXIT_UNARMED:
            raise RuntimeError(
                f"the forkserver did not arm {SERVER_EXIT} (it ignores a preload's ImportError: "
                f"try `import {SERVER_EXIT}`); a killed test's forkserver would outlive it"
            )
        if probe.exitcode != 0:
            probe.kill()
            raise RuntimeError(
                f"the forkserver could not start a process (exit code {probe.exitcode}); see "
                "stderr. A script that starts ranks needs an `if __name__ == '__main__':` guard: "
                "multiprocessing re-runs it in every new process."
            )
        probe.close()
        atexit.register(_stop_forkserver)
        _warm_contexts.add(method)
    return ctx


def _stop_forkserver() -> None:
    """At exit, end the forkserver at once. On its own it ends only once this process is gone
    (its 'alive' pipe closes; test_utils.distributed_server_exit)."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


_SERVER_EXIT_UNARMED = 3


def _check_server_exit() -> None:
    """In a process the forkserver forked: exit code _SERVER_EXIT_UNARMED unless it is armed."""
    server_exit = sys.modules.get(SERVER_EXIT)
    if server_exit is None or not server_exit.armed_in(os.getppid()):
        sys.exit(_SERVER_EXIT_UNARMED)


# ---------------------------------------------------------------------------------------------
# In the parent: one rank's state


class _Rank:
    def __init__(self, index: int, process, conn, log_path: str, stack_path: str):
        self.index = index
        self.process = process
        self.conn = conn
        self.log_path = log_path
        self.stack_path = stack_path
        self.returned = False
        self.value = None
        self.error: tuple[str, str, int | None] | None = None  # headline, traceback, log end
        self.skip_reason: str | None = None
        self.exitcode: int | None = None
        self.stopped_because: str | None = None  # set when the harness stops it
        self.stack = ""
        self.failed_at: float | None = None

    @property
    def running(self) -> bool:
        return self.exitcode is None

    @property
    def ended_early(self) -> bool:
        """Reported a skip or failure, or died: the other ranks may now wait forever."""
        return self.skip_reason is not None or self.problem() is not None

    def read_report(self) -> None:
        try:
            kind, body = self.conn.recv()
        except (EOFError, OSError):
            self._close_conn()
            return
        except Exception as exc:  # e.g. a returned object whose class the parent lacks
            self._set_error((f"returned a value the parent cannot unpickle: {exc!r}", "", None))
            return
        if kind == "return":
            self.returned, self.value = True, body
        elif kind == "skip":
            self.skip_reason = body
        else:
            self._set_error(body)

    def note_exit(self) -> None:
        self.exitcode = self.process.exitcode
        while self.conn is not None and self.conn.poll():
            self.read_report()
        self._close_conn()
        if self.problem() is not None and self.failed_at is None:
            self.failed_at = time.monotonic()

    def _set_error(self, error) -> None:
        if self.error is None:
            self.error = error
            self.failed_at = time.monotonic()

    def _close_conn(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def problem(self) -> str | None:
        """What went wrong with this rank, in a few words, or None."""
        if self.error is not None:
            return self.error[0]
        if self.stopped_because is not None:
            return self.stopped_because
        if self.exitcode is None or self.skip_reason is not None:
            return None
        after = ", after returning" if self.returned else ""
        if self.exitcode < 0:
            return f"killed by {_signal_name(-self.exitcode)}{after}"
        if self.exitcode > 0:
            return f"exited with code {self.exitcode}{after}"
        return None if self.returned else "exited with code 0 without returning"

    def request_stack_dump(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGUSR1)

    def kill(self) -> None:
        if self.process.pid is None:  # never started
            return
        # The group first: after the rank itself is gone, its children may still be in it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# ---------------------------------------------------------------------------------------------
# In the parent: the run


def run_ranks(
    fn,
    world_size: int,
    *,
    backend: str,
    args: tuple = (),
    timeout: float | None = None,
    label: str | None = None,
):
    """Run fn(*args) on `world_size` ranks with torch.distributed initialised; their returns.

    fn must be picklable by reference (a module-level function); args and return values must
    pickle. For NCCL each rank first calls torch.cuda.set_device(rank). Raises RankFailure if
    any rank raises, dies or is still running after `timeout` seconds (default_timeout()), and
    unittest.SkipTest if a rank skips. `label` names the run in logs (default: fn's name).
    """
    return _run(fn, world_size, backend, tuple(args), timeout, label or _label(fn))


def _run(fn, world_size: int, backend: str, args: tuple, timeout: float | None, label: str):
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    try:
        call = pickle.dumps((fn, args))
    except Exception as exc:
        raise TypeError(
            f"run_ranks needs a module-level function and picklable args: {exc}"
        ) from exc
    timeout = default_timeout() if timeout is None else float(timeout)
    ctx = _context()  # before the clock starts: the first call imports torch in the server

    log_root, keep_logs = _log_root()
    os.makedirs(log_root, exist_ok=True)
    log_dir = tempfile.mkdtemp(prefix=f"{label}-", dir=log_root)
    store_dir = tempfile.mkdtemp(prefix="rendezvous-", dir=_scratch_root())
    base = dict(
        world_size=world_size,
        backend=backend,
        call=call,
        fn_module=fn.__module__,
        fn_module_file=module_file(fn.__module__),
        store_path=os.path.join(store_dir, "store"),
        env=dict(os.environ),
        parent_pid=os.getpid(),
        start_method=start_method(),
    )
    ranks: list[_Rank] = []
    first = None
    try:
        deadline = time.monotonic() + timeout
        for index in range(world_size):
            _start_rank(ctx, index, log_dir, base, ranks)
        first = _watch(ranks, deadline)
        _stop_running_ranks(ranks, first, timeout)
    finally:
        for rank in ranks:
            rank.kill()
        _reap(ranks)
        shutil.rmtree(store_dir, ignore_errors=True)

    values = _outcome(ranks, first, label, log_dir)
    if not keep_logs:
        shutil.rmtree(log_dir, ignore_errors=True)
    return values


def module_file(name: str) -> str | None:
    return getattr(sys.modules.get(name), "__file__", None)


def _start_rank(ctx, index: int, log_dir: str, base: dict, ranks: list[_Rank]) -> None:
    reader, writer = ctx.Pipe(duplex=False)
    log_path = os.path.join(log_dir, f"rank{index}.log")
    stack_path = os.path.join(log_dir, f"rank{index}.stack")
    spec = rank_process.RankSpec(
        rank=index, log_path=log_path, stack_path=stack_path, conn=writer, **base
    )
    # Not daemonic: multiprocessing forbids daemons their own children (DataLoader workers).
    process = ctx.Process(target=rank_process.main, args=(spec,), name=f"rank{index}", daemon=False)
    # Tracked before it starts: an interrupt right after start() must still kill it.
    ranks.append(_Rank(index, process, reader, log_path, stack_path))
    try:
        process.start()
    finally:
        writer.close()  # the rank holds the only write end, so its death reads as EOF


def _watch(ranks: list[_Rank], deadline: float) -> _Rank | None:
    """Collect reports and exits until all ranks ended, the timeout, or the grace after the
    first rank that ended early. Returns that first rank, if any."""
    first = None
    while any(r.running for r in ranks):
        cutoff = deadline if first is None else min(deadline, first.failed_at + GRACE_S)
        left = cutoff - time.monotonic()
        if left <= 0:
            break
        waitables = [r.conn for r in ranks if r.conn is not None]
        waitables += [r.process.sentinel for r in ranks if r.running]
        ready = set(multiprocessing.connection.wait(waitables, timeout=left))
        for rank in ranks:
            if rank.conn is not None and rank.conn in ready:
                rank.read_report()
            if rank.running and rank.process.sentinel in ready:
                rank.note_exit()
            if rank.ended_early and rank.failed_at is None:
                rank.failed_at = time.monotonic()  # a skip: starts the grace like a failure
        if first is None:
            early = [r for r in ranks if r.ended_early]
            first = min(early, key=lambda r: r.failed_at) if early else None
    return first


def _stop_running_ranks(ranks: list[_Rank], first: _Rank | None, timeout: float) -> None:
    """Dump the stacks of ranks still running, and record why the harness stops them."""
    running = [r for r in ranks if r.running]
    for rank in running:
        if first is None:
            rank.stopped_because = f"timed out after {timeout:.1f} s"
        else:
            what = "skipped" if first.skip_reason is not None else "failed"
            waited = time.monotonic() - first.failed_at
            rank.stopped_because = f"still running {waited:.1f} s after rank {first.index} {what}"
        if rank.returned:
            rank.stopped_because += " (it had returned; stuck in shutdown)"
        rank.request_stack_dump()
    for rank in running:
        rank.stack = _read_stack_dump(rank.stack_path, time.monotonic() + STACK_DUMP_WAIT_S)


def _read_stack_dump(path: str, until: float) -> str:
    """faulthandler's dump, once its size stops changing (it writes from a signal handler)."""
    last = -1
    while time.monotonic() < until:
        size = os.path.getsize(path) if os.path.exists(path) else 0
        if size and size == last:
            break
        last = size
        time.sleep(0.05)
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _reap(ranks: list[_Rank]) -> None:
    """Wait for killed ranks to be reaped, then release their pipes and unused files."""
    until = time.monotonic() + REAP_WAIT_S
    for rank in ranks:
        started = rank.process.pid is not None
        if started:
            rank.process.join(max(0.0, until - time.monotonic()))
            if rank.running and rank.process.exitcode is not None:
                rank.note_exit()
        if rank.conn is not None:
            rank.conn.close()
            rank.conn = None
        if started and rank.process.exitcode is not None:
            rank.process.close()
        with contextlib.suppress(OSError):
            if os.path.getsize(rank.stack_path) == 0:
                os.remove(rank.stack_path)  # no dump requested: not worth keeping


def _outcome(ranks: list[_Rank], first: _Rank | None, label: str, log_dir: str) -> list:
    # The rank that ended first decides: if it skipped, the others' errors are most likely
    # their peer leaving (e.g. "Connection reset by peer" in the closing barrier).
    if first is not None and first.skip_reason is not None:
        raise unittest.SkipTest(f"rank {first.index}: {first.skip_reason}")
    failed = [r for r in ranks if r.problem() is not None]
    if failed:
        raise RankFailure(_failure_message(failed, len(ranks), label, log_dir))
    return [r.value for r in ranks]


def _failure_message(failed: list[_Rank], world_size: int, label: str, log_dir: str) -> str:
    # The rank that failed first is usually the cause; the others are often stuck waiting on it.
    order = sorted(failed, key=lambda r: (r.failed_at is None, r.failed_at or 0, r.index))
    summary = "; ".join(f"rank {r.index} {r.problem()}" for r in order)
    lines = [
        f"{len(failed)} of {world_size} ranks failed in {label}: {summary}",
        f"rank logs: {log_dir}",
    ]
    for rank in order:
        lines += ["", f"===== rank {rank.index}: {rank.problem()} ====="]
        output_end = None
        if rank.error is not None:
            _, text, output_end = rank.error
            if text:
                lines.append(text.rstrip())
        if rank.stack:
            lines += ["--- Python stacks when stopped ---", _tidy_stack(rank.stack)]
        tail = _tail(rank.log_path, LOG_TAIL_LINES, output_end)
        if tail:
            lines += [f"--- output (last {LOG_TAIL_LINES} lines of {rank.log_path}) ---", tail]
    return "\n".join(lines)


def _tail(path: str, count: int, end: int | None = None) -> str:
    """Last `count` lines of a log, up to byte `end` (where a reported traceback begins)."""
    try:
        with open(path, "rb") as f:
            data = f.read() if end is None else f.read(end)
    except OSError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-count:]).rstrip()


def _tidy_stack(dump: str) -> str:
    """faulthandler's dump without the watchdog thread and the frames below rank_process.main."""
    threads = []
    for block in dump.strip().split("\n\n"):
        if f"in {rank_process.WATCHDOG_FUNCTION}" in block:
            continue
        kept = []
        for line in block.splitlines():
            kept.append(line)
            if line.endswith(f"in {rank_process.main.__name__}"):
                break
        threads.append("\n".join(kept))
    return "\n\n".join(threads)


# ---------------------------------------------------------------------------------------------
# A process group in this process


@contextlib.contextmanager
def single_process_group(backend: str, device: str | None = None):
    """A world_size=1 default process group in this process, for single-process DDP/FSDP.

    Yields the group's torch.device: `device`, else cuda:0 for NCCL and cpu otherwise.
    """
    if dist.is_initialized():
        raise RuntimeError("a default process group already exists in this process")
    store_dir = tempfile.mkdtemp(prefix="rendezvous-", dir=_scratch_root())
    try:
        default = torch.device("cuda", 0) if "nccl" in backend else torch.device("cpu")
        target = torch.device(device) if device else default
        rank_process.init_process_group(backend, os.path.join(store_dir, "store"), 0, 1, target)
        try:
            yield target
        finally:
            dist.destroy_process_group()
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
