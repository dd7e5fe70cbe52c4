"""The test process's end: how it exited, and whether its pytest session ended.

A test process can exit before its tests ran: `os._exit(0)` in a test or in a library's
child-cleanup path, `pytest.exit(returncode=0)`. Bazel 4.2.3 ignores TEST_PREMATURE_EXIT_FILE
and caches such a run as PASSED, and `os._exit` skips every Python cleanup. The runner
therefore runs pytest in a child process (`run_session`) whose ledger
(tools/runner/session/ledger.py) records the selection, each test started, and the end of the
session, each line the runner's as it is written, however the process ends.

An exit status 0 is accepted here only if the session ended; the cases themselves are judged
from what the witness saw (tools/runner/verdict.py), so a session that ended early, or a status
a conftest or an `atexit` rewrote, proves nothing. The check lives in the runner, so it holds
under `bazel test`, `bazel run` and on remote workers alike.
"""

import json
import signal
import subprocess
import sys

from tools.runner.session.ledger import (
    COLLECTION,
    ELSEWHERE,
    FILTERED,
    INTERRUPTED,
    SELECTED,
    SESSION_FINISHED,
    START,
)


class Record:
    def __init__(self, text: str):
        self.selected, self.started = [], []  # case keys; node ids
        self.excused = set()  # given to another shard, or left out by the user's filter
        self.session_finished = False
        self.collection: dict | None = None  # a sharded target's (collection_record.py)
        self.interrupted: dict | None = None  # {"running", "stack"} (child.py)
        for line in text.splitlines():
            event, _, nodeid = line.partition(" ")
            if event == SELECTED:
                self.selected.append(nodeid)
            elif event == START:
                self.started.append(nodeid)
            elif event in (ELSEWHERE, FILTERED):
                self.excused.add(nodeid)
            elif event == SESSION_FINISHED:
                self.session_finished = True
            elif event in (COLLECTION, INTERRUPTED):
                try:
                    setattr(self, event, json.loads(nodeid))
                except ValueError:
                    pass  # cut short as its process died: as if never written
            else:  # a kind renamed on one side only: no line is dropped unread
                raise ValueError(f"a ledger line of no kind session/ledger.py writes: {line!r}")

    @property
    def last_started(self) -> str | None:
        return self.started[-1] if self.started else None


def verdict(record: Record, code: int) -> tuple[int, str]:
    """The target's exit status and, when the run did not complete, why."""
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
    return 0, ""


def run_session(argv: list[str], env, ledger, streams: list) -> tuple[int, Record]:
    """Runs the pytest child `argv` to its end, handing it the `streams`' ends (witness.Stream;
    `ledger`, one of them, its ledger's); returns the target's exit status and the ledger.

    SIGTERM is forwarded to the child (its handler dumps stacks and stops the tests); SIGINT is
    left to the child, which shares the terminal's process group under `bazel run`.
    """
    child = subprocess.Popen(argv, env=env, pass_fds=[s.fd for s in streams])
    for stream in streams:
        stream.given()
    signal.signal(signal.SIGTERM, lambda signum, frame: _forward(child, signum))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = child.wait()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    record = Record(ledger.text())
    status, why = verdict(record, code)
    if why:
        print(f"\ntorch_test: FAILED: {why}", file=sys.stderr)
    return status, record


def _forward(child: subprocess.Popen, signum: int) -> None:
    try:
        child.send_signal(signum)
    except ProcessLookupError:
        pass
