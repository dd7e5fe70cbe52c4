"""Proof that pytest ran every selected test: a ledger the test process writes, the runner reads.

A test process can exit 0 before its tests ran: `os._exit(0)` in a test or in a library's
child-cleanup path, `pytest.exit(returncode=0)`. Bazel 4.2.3 ignores TEST_PREMATURE_EXIT_FILE
and caches such a run as PASSED, and `os._exit` skips every Python cleanup, so no check inside
the test process can catch it. The runner therefore runs pytest in a child process
(`run_session`) whose `Ledger` plugin appends one line per event to a file; each line is one
write(2) to an O_APPEND descriptor, so it is on disk however the process ends:

    selected NODEID        each test chosen for this variant and shard (after -k and sharding)
    start NODEID           the test's setup begins
    finish NODEID          its setup, call and teardown have reported
    session_finished       pytest's session ended (pytest_sessionfinish)

The runner (the parent, which also holds the GPU lease and the private TMPDIR) accepts exit
status 0 only if the session finished and every selected test finished; otherwise the target
fails with a message naming the last test that started. The check lives in the runner, so it
holds under `bazel test`, `bazel run` and on remote workers alike.
"""

import os
import signal
import subprocess
import sys

from tools.runner import lifetime

_SELECTED, _START, _FINISH, _SESSION_FINISHED = "selected", "start", "finish", "session_finished"
# A group kill (Bazel's timeout) and the runner's forward of it are one request, not two.
SIGTERM_REPEAT_WINDOW_S = 1.0


class Ledger:
    """pytest plugin of the child process: records what was selected, started and finished."""

    def __init__(self, path: str):
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def _write(self, event: str, nodeid: str = "") -> None:
        os.write(self._fd, f"{event} {nodeid}".rstrip().encode() + b"\n")

    def pytest_collection_finish(self, session):
        for item in session.items:
            self._write(_SELECTED, item.nodeid)

    def pytest_runtest_logstart(self, nodeid, location):
        self._write(_START, nodeid)

    def pytest_runtest_logfinish(self, nodeid, location):
        self._write(_FINISH, nodeid)

    def pytest_sessionfinish(self, session, exitstatus):
        self._write(_SESSION_FINISHED)


class Record:
    def __init__(self, path: str):
        self.selected, self.started, self.finished = [], [], set()
        self.session_finished = False
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            event, _, nodeid = line.partition(" ")
            if event == _SELECTED:
                self.selected.append(nodeid)
            elif event == _START:
                self.started.append(nodeid)
            elif event == _FINISH:
                self.finished.add(nodeid)
            elif event == _SESSION_FINISHED:
                self.session_finished = True

    @property
    def unfinished(self) -> list[str]:
        return [n for n in self.selected if n not in self.finished]

    @property
    def last_started(self) -> str | None:
        return self.started[-1] if self.started else None


def verdict(ledger_path: str, code: int) -> tuple[int, str]:
    """The target's exit status and, when the run did not complete, why."""
    record = Record(ledger_path)
    last = record.last_started
    where = f"; the last test that started: {last}" if last else "; no test had started"
    if code < 0:
        name = signal.Signals(-code).name
        return 128 - code, f"the test process was killed by {name}{where}"
    if code != 0:
        if not record.session_finished:
            return code, f"the test process exited with status {code} before pytest finished{where}"
        return code, ""
    if not record.session_finished:
        return 1, f"the test process exited with status 0 before pytest finished{where}"
    unfinished = record.unfinished
    if unfinished:
        shown = "\n  ".join(unfinished[:20]) + ("\n  ..." if len(unfinished) > 20 else "")
        return 1, (
            f"pytest ended with status 0, but {len(unfinished)} of {len(record.selected)} "
            f"selected tests never reported a result (pytest.exit() or an early exit?)"
            f"{where}:\n  {shown}"
        )
    return 0, ""


def run_session(argv: list[str], env, ledger_path: str) -> int:
    """Runs the pytest child `argv` to its end; returns the target's exit status.

    SIGTERM is forwarded to the child (its handler dumps stacks and stops the tests); SIGINT is
    left to the child, which shares the terminal's process group under `bazel run`.
    """
    child = subprocess.Popen(argv, env=env)
    signal.signal(signal.SIGTERM, lambda signum, frame: _forward(child, signum))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = child.wait()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    status, why = verdict(ledger_path, code)
    if why:
        print(f"\ntorch_test: FAILED: {why}", file=sys.stderr)
    return status


def _forward(child: subprocess.Popen, signum: int) -> None:
    try:
        child.send_signal(signum)
    except ProcessLookupError:
        pass


def die_with_parent() -> None:
    """In the child: SIGTERM when the runner dies (e.g. SIGKILL), so its ranks are cleaned up."""
    lifetime.die_with_parent(signal.SIGTERM)
