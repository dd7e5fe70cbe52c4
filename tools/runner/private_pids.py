"""The test's processes see only themselves: a pid namespace and a /proc of their own.

The source view (source_view.py) hides the undeclared source files in the runner's mount
namespace, but `/proc/<pid>/root` of a process outside it that the test can see (an ancestor:
the sandbox's init, the runner's parent) is that process's root, the real workspace with it;
`/proc/<runner's pid>/mem`, `pidfd_getfd` and a parent's `/proc/<pid>/environ` reach the runner.
So the runner starts the test process and the inventory as

    python3 -S -m tools.runner.private_pids -- COMMAND...

which unshares a pid namespace (in a user namespace of its own ids where it is not root) and
forks the namespace's init; the init mounts the namespace's /proc in a mount namespace of its
own (a copy of the runner's, the source view with it) and forks COMMAND,
the namespace's pid 2. From there /proc lists the test's own processes only, and no process
outside has a pid to reach it by. COMMAND is not the init: an init's signals are ignored unless
it handles them, so a test's `os.kill(os.getpid(), SIGKILL)` or `abort()` would not end it.

The init reaps orphans and passes SIGTERM on (Bazel's timeout, the runner's forward); SIGINT
reaches COMMAND from the terminal's process group, as before. When COMMAND ends the init ends,
and the kernel kills what is left of the namespace (a rank that outlived its test). The outer
process ends as COMMAND did (its status, or its signal), so the runner reads the test's end as
before.

Where the OS refuses the pid namespace (no user namespaces), COMMAND runs as it is; where it
refuses only the /proc (a /proc with masked paths, which the kernel will not mount anew inside a
user namespace), COMMAND runs in the namespace with this host's /proc. Either way after one line
that says so in the test's log; docs/runner.md's trust boundary names it. Standard library only
(-S: no site, no sitecustomize).
"""

import os
import resource
import signal
import sys

from tools.runner import source_view
from tools.runner.process import lifetime

CLONE_NEWPID = 0x20000000
MS_NOEXEC = 0x8
PREFIX = [sys.executable, "-S", "-m", "tools.runner.private_pids", "--"]
# Held while the namespace is made, so that none is lost to a default action; COMMAND gets its
# parent's mask back before it starts.
_WAITED = {signal.SIGTERM, signal.SIGCHLD}


def _mount_proc() -> None:
    """In the namespace's init: its own /proc, in a mount namespace of its own (the outer
    process keeps the /proc its pids are in). SourceViewError where the OS refuses."""
    source_view.unshare(source_view.CLONE_NEWNS)
    source_view.mount(None, "/", None, source_view.MS_REC | source_view.MS_PRIVATE)
    flags = source_view.MS_NOSUID | source_view.MS_NODEV | MS_NOEXEC
    source_view.mount("proc", "/proc", "proc", flags)


def _close_above(keep: int) -> None:
    """Drops this process's copies of the descriptors COMMAND was given: their readers see
    their end when COMMAND's processes close them, not when a waiter here exits."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor


def _wait_passing_sigterm(child: int, reap_all: bool) -> int:
    """Waits for `child`, passing each SIGTERM on to it; in an init (`reap_all`) also reaps
    every orphan. Returns the child's wait status."""
    while True:
        info = signal.sigwaitinfo(_WAITED)
        if info.si_signo == signal.SIGTERM:
            try:
                os.kill(child, signal.SIGTERM)
            except ProcessLookupError:
                pass
            continue
        while True:
            try:
                pid, status = os.waitpid(-1 if reap_all else child, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
            if pid == child:
                return status


def _init(command: list[str], mask: set, status_out: int) -> None:
    """The namespace's pid 1: its /proc, COMMAND as pid 2, then the orphans' reaper; COMMAND's
    wait status goes to `status_out` (an init cannot end by a signal to pass it on)."""
    lifetime.die_with_parent(signal.SIGTERM)  # passed on to COMMAND, as the runner's own end
    try:
        _mount_proc()
    except source_view.SourceViewError as error:  # a pid namespace still, with the host's /proc
        _say_unprotected(str(error))
    test = os.fork()
    if test == 0:
        os.close(status_out)
        _exec(command, mask)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's, for COMMAND
    _close_above(keep=status_out)
    os.write(status_out, str(_wait_passing_sigterm(test, reap_all=True)).encode())
    os._exit(0)


def _end_as(status: int) -> None:
    """Ends this process as a child that ended with wait status `status` did."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the test's core, not ours
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def run(command: list[str]) -> None:
    """Runs COMMAND as pid 2 of a pid namespace of its own and ends as it ends; never returns."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    try:  # a pid namespace for the next child (in a user namespace of its own, not as root)
        source_view.unshare(CLONE_NEWPID)
    except source_view.SourceViewError as error:  # nothing changed: COMMAND runs as it would
        _say_unprotected(str(error))
        _exec(command, mask)
    lifetime.die_with_parent(signal.SIGTERM)
    status_in, status_out = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(status_in)
        _init(command, mask, status_out)
    os.close(status_out)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's, for COMMAND
    _close_above(keep=status_in)
    ended = _wait_passing_sigterm(init, reap_all=False)
    said = os.read(status_in, 64)
    # Nothing said: the init itself was killed (SIGKILL), and the namespace with it.
    _end_as(int(said) if said else ended)


def _exec(command: list[str], mask: set) -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"torch_test: cannot start {command[0]}: {error.strerror}", file=sys.stderr)
        os._exit(127)


def _say_unprotected(why: str) -> None:
    print(
        "torch_test: note: the test's processes see this host's /proc "
        f"(tools/runner/private_pids.py: {why})",
        file=sys.stderr,
    )


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "--":
        print("usage: python3 -S -m tools.runner.private_pids -- COMMAND...", file=sys.stderr)
        sys.exit(2)
    run(argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
