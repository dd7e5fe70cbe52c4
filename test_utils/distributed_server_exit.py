"""The ranks' forkserver ends at once when its test process is gone, and takes the ranks along.

Imported last by the forkserver of test_utils.distributed (FORKSERVER_PRELOAD). The server
learns that its test process is gone when its 'alive' pipe closes; multiprocessing then raises
SystemExit and the server exits as any interpreter does: it runs the atexit handlers of what it
preloaded and tears down torch. That is CPU work, about a second alone and many times that on a
loaded host, during which the server outlives its test. atexit runs handlers last-registered first,
so the one registered here, after every preload, runs before all of them: it kills every
child's process group (a rank leads its own; its compile workers are in it) and ends the server
with os._exit, no teardown. Killing the groups from here comes before the server's exit fires
the ranks' PR_SET_PDEATHSIG, which would kill a rank before its own watchdog
(test_utils.rank_process) took its children along.

It arms only while forkserver.main imports it: the server ignores a preload's ImportError, so
test_utils.distributed asks a forked process whether the server is armed (armed_in).
"""

import atexit
import contextlib
import os
import signal
import sys
from multiprocessing import forkserver

_armed_pid: int | None = None


def armed_in(pid: int) -> bool:
    """Whether the server exit is armed in process `pid` (ask from a process it forked)."""
    return _armed_pid == pid


def _children() -> list[int]:
    """This process's children, from /proc."""
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                found += [int(pid) for pid in f.read().split()]
        return found
    me = str(os.getpid())  # kernels without /proc/PID/task/TID/children
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError, ValueError):
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rpartition(")")[2].split()[1] == me:
                    found.append(int(entry))
    return found


def _end_server() -> None:
    if os.getpid() != _armed_pid:  # a forked child that exits normally: not ours to end
        return
    for child in _children():
        # A rank leads its own group; one still starting may not lead one yet.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    os._exit(0)


def _imported_by_forkserver() -> bool:
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False


if _imported_by_forkserver():
    _armed_pid = os.getpid()
    atexit.register(_end_server)
