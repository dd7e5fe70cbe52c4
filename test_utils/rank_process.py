"""The rank side of the multi-process harness (test_utils.distributed): what a rank process does.

main(spec) is every rank's entry point. In order: leave the parent's process group and die with
the test process, send output to the rank's log, arm a SIGUSR1 stack dump, take the test
process's environment, install the test process's checks (tools/runner/process/descendants.py:
the read audit, inductor's caches, the GPU memory cap), join the FileStore rendezvous, run the
function, and report its return value, exception or skip to the parent over a pipe.
It always ends with os._exit.
"""

import contextlib
import dataclasses
import faulthandler
import importlib
import importlib.util
import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
import unittest

import torch
import torch.distributed as dist

from tools.runner.process import descendants, lifetime, process_env, witness


@dataclasses.dataclass
class RankSpec:
    """Everything a rank needs, sent to it when it starts."""

    rank: int
    world_size: int
    backend: str
    call: bytes  # pickled (fn, args); loaded in the rank after its output is redirected
    fn_module: str
    fn_module_file: str | None
    store_path: str
    log_path: str
    stack_path: str
    env: dict
    parent_pid: int
    start_method: str
    conn: object  # multiprocessing Connection, write end


_stack_file = None  # faulthandler writes here on SIGUSR1; must stay open


def main(spec: RankSpec) -> None:
    """Entry point of every rank process. Never returns: exits with os._exit."""
    _detach_from_parent(spec)
    _redirect_output(spec.log_path)
    _arm_stack_dump(spec.stack_path)
    _adopt_environment(spec)
    # The checks of every process a test starts: the test process's read-audit record (before
    # the test's module is imported), inductor's caches, the lease's GPU memory cap.
    descendants.install()
    witness.check_returns()  # a rank's test method that returns a value fails too
    try:
        fn, args = _load_call(spec)
        _init_process_group(spec)
        value = fn(*args)
    except BaseException as exc:  # every way out is reported
        _report_exception(spec, exc, "")
        _exit(1)
    try:
        spec.conn.send(("return", value))
    except Exception as exc:
        _report_exception(spec, exc, " while sending its return value to the parent")
        _exit(1)
    try:
        # Nobody tears down links a slower rank may still be using.
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:
        _report_exception(spec, exc, " in shutdown, after returning")
        _exit(1)
    _exit(0)


def _detach_from_parent(spec: RankSpec) -> None:
    # Own process group: the parent's killpg then also reaches this rank's children.
    os.setpgrp()
    if spec.start_method == "forkserver":
        _drop_forkserver_lifeline()
    lifetime.die_with_parent(signal.SIGKILL)
    _die_with_test_process(spec.parent_pid)


def _drop_forkserver_lifeline() -> None:
    """Close the forkserver's 'alive' pipe that children inherit.

    The forkserver exits when every holder of that pipe is gone; ranks holding it would keep
    it (and so their PDEATHSIG parent) alive after the test process died.
    """
    from multiprocessing import forkserver

    server = forkserver._forkserver
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None


def _die_with_test_process(test_pid: int) -> None:
    """Kill this rank's whole process group when the test process dies.

    PDEATHSIG only covers the rank itself (and fires when the forkserver, its parent, exits);
    this also takes down grandchildren such as compile workers, which have no PDEATHSIG.
    """
    try:
        pidfd = os.pidfd_open(test_pid)
    except ProcessLookupError:
        os._exit(1)  # the test process died while this rank was starting
    except (AttributeError, OSError):
        pidfd = None  # no pidfd (Linux < 5.3): poll instead

    threading.Thread(
        target=_kill_group_when_test_process_dies,
        args=(test_pid, pidfd),
        name="test-process-watchdog",
        daemon=True,
    ).start()


def _kill_group_when_test_process_dies(test_pid: int, pidfd: int | None) -> None:
    if pidfd is not None:
        select.select([pidfd], [], [])
    else:
        while _pid_exists(test_pid):
            time.sleep(1.0)
    os.killpg(0, signal.SIGKILL)


# Its frame is in every stack dump; the parent leaves it out of reports.
WATCHDOG_FUNCTION = _kill_group_when_test_process_dies.__name__


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _redirect_output(log_path: str) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.close(null_fd)
    # Line-buffered, so a SIGKILLed rank's last lines are in its log.
    sys.stdout = open(1, "w", buffering=1, errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)


def _arm_stack_dump(stack_path: str) -> None:
    global _stack_file
    faulthandler.enable(file=sys.stderr, all_threads=True)  # crashes leave a stack in the log
    _stack_file = open(stack_path, "w")
    faulthandler.register(signal.SIGUSR1, file=_stack_file, all_threads=True, chain=False)


def _adopt_environment(spec: RankSpec) -> None:
    # The forkserver's environment is from when it started; the test's may have changed since.
    # All ranks share this host; loopback also works in network-less sandboxes, where the
    # hostname may resolve to an address that does not exist.
    process_env.adopt(
        {
            "GLOO_SOCKET_IFNAME": "lo",
            **spec.env,
            "RANK": str(spec.rank),
            "WORLD_SIZE": str(spec.world_size),
            "LOCAL_RANK": str(spec.rank),
            "LOCAL_WORLD_SIZE": str(spec.world_size),
        }
    )


def _load_call(spec: RankSpec):
    import_module(spec.fn_module, spec.fn_module_file)
    return pickle.loads(spec.call)


def import_module(name: str, file: str | None):
    """Import a test module by name, or from its file if it is not on sys.path (importlib mode)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        if not file:
            raise
    module_spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return module


def _init_process_group(spec: RankSpec) -> None:
    device = torch.device("cuda", spec.rank) if "nccl" in spec.backend else None
    init_process_group(spec.backend, spec.store_path, spec.rank, spec.world_size, device)


def init_process_group(backend: str, store_path: str, rank: int, world: int, device) -> None:
    """The default group over a FileStore; NCCL's is bound to `device` (this rank's GPU)."""
    kwargs = {}
    if "nccl" in backend:
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    store = dist.FileStore(store_path, world)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, **kwargs)


def _report_exception(spec: RankSpec, exc: BaseException, where: str) -> None:
    reason = skip_reason(exc)
    if reason is not None:
        print(f"rank {spec.rank} skipped: {reason}", file=sys.stderr)
        message = ("skip", reason)
    else:
        text = getattr(exc, "rank_report", None) or traceback.format_exc()
        sys.stdout.flush()
        output_end = os.fstat(2).st_size  # the parent shows output up to here, then `text`
        print(text, file=sys.stderr)
        headline = getattr(exc, "rank_headline", None) or f"raised {_one_line(exc)}"
        message = ("raise", (headline + where, text, output_end))
    with contextlib.suppress(Exception):
        spec.conn.send(message)


def skip_reason(exc: BaseException) -> str | None:
    if isinstance(exc, unittest.SkipTest):
        return str(exc)
    outcomes = sys.modules.get("_pytest.outcomes")
    if outcomes is not None and isinstance(exc, outcomes.Skipped):
        return exc.msg
    return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def _exit(code: int) -> None:
    # os._exit: no atexit hooks or thread joins that could hang a finished rank.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
