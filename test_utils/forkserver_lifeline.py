"""The forkserver ends with the test process, at once, and takes every rank's group with it.

Imported first in the multiprocessing forkserver of test_utils.distributed (FORKSERVER_PRELOAD),
before torch: with envvars.FORKSERVER set (only while the forkserver starts), the import arms
a parent-death signal. Without it, a forkserver whose test process was killed notices only
through its 'alive' pipe and then exits as any interpreter does, tearing down the torch it
imported: CPU work that, on a loaded host, kept it alive for seconds after its test, longer the
heavier the load (bench/stress.sh beside other Bazel work). With it, the kernel signals the server
when the test process dies, however it dies; the handler kills each rank's process group (its
compile workers and other children included) and ends the server with os._exit, no teardown.

The ranks' own watchdog (test_utils.rank_process) still kills their groups when the test process
dies; this does the same from a process that is always idle, so it never waits for the GIL,
and before the ranks' PR_SET_PDEATHSIG (which fires when the server exits) could kill a rank
whose watchdog had not yet run. A parent-death signal follows the thread that started the
server: start it from the test's main thread (run_ranks and warm_up do, under pytest).
Standard library only.
"""

import contextlib
import os
import signal

from tools.hardware import envvars
from tools.runner import lifetime


def _children() -> list[int]:
    """This process's children (the ranks), from /proc."""
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                found += [int(pid) for pid in f.read().split()]
        return found
    me = str(os.getpid())  # kernels without /proc/PID/task/TID/children
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rpartition(")")[2].split()[1] == me:
                    found.append(int(entry))
    return found


def _end_server(armed_in: int) -> None:
    if os.getpid() != armed_in:  # a rank forked from the server inherited the handler
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    for child in _children():
        # A rank leads its own group; one still starting may not yet.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    os._exit(0)


def arm() -> None:
    """In the forkserver: SIGTERM (the test process's death, or Bazel's group SIGTERM) ends it."""
    armed_in = os.getpid()
    signal.signal(signal.SIGTERM, lambda signum, frame: _end_server(armed_in))
    lifetime.die_with_parent(signal.SIGTERM)


if os.environ.get(envvars.FORKSERVER) == "1":
    arm()
