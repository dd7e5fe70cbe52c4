"""The ledger the test process writes and the runner reads (tools/runner/completion.py says why).

One line per event, each one write(2) to an O_APPEND descriptor, so it is on disk however the
process ends:

    selected CASE          each test chosen for this variant and shard (after -k and sharding)
    elsewhere CASE         a test the shard selection gave to another shard
    filtered CASE          a test the user's own filter left out (user_filter.py)
    start NODEID           the test's setup begins
    finish NODEID          its setup, call and teardown have reported
    session_finished       pytest's session ended (pytest_sessionfinish)

CASE is the runner's key of a case (collection_record.case_key), NODEID pytest's node id.

Only these two reasons for not running a test are written: the runner holds the ledger against
the source's inventory (tools/runner/session/inventory.py), and a test of the variant left out
for any other reason (a conftest's selection, say) fails the target as never run.
"""

import os

from tools.runner.session.collection_record import case_key

SELECTED, START, FINISH, SESSION_FINISHED = "selected", "start", "finish", "session_finished"
ELSEWHERE, FILTERED = "elsewhere", "filtered"


def plugin(path: str, shards=None, user=None):
    """The pytest plugin of the test process that writes the ledger at `path`.

    `shards`: the ShardSelector (its `elsewhere`); `user`: the session's UserFilter, if any.
    (A factory: the runner's own process reads the ledger and never imports pytest.)
    """
    import pytest

    class Ledger:
        """pytest plugin of the child process: records what was selected, started and finished."""

        def __init__(self):
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

        def _write(self, event: str, nodeid: str = "") -> None:
            os.write(self._fd, f"{event} {nodeid}".rstrip().encode() + b"\n")

        @pytest.hookimpl(wrapper=True)
        def pytest_collection_modifyitems(self, config, items):
            collected = list(items)  # outermost: before any selection
            result = yield
            kept = {id(i) for i in items}
            dropped = [i for i in collected if id(i) not in kept]
            elsewhere = set(shards.elsewhere) if shards else set()
            left_out = user.left_out(config) if user else lambda item: False
            for item in dropped:
                if item.nodeid in elsewhere:
                    self._write(ELSEWHERE, case_key(item))
                elif left_out(item):
                    self._write(FILTERED, case_key(item))
            return result

        def pytest_collection_finish(self, session):
            for item in session.items:
                self._write(SELECTED, case_key(item))

        def pytest_runtest_logstart(self, nodeid, location):
            self._write(START, nodeid)

        def pytest_runtest_logfinish(self, nodeid, location):
            self._write(FINISH, nodeid)

        def pytest_sessionfinish(self, session, exitstatus):
            self._write(SESSION_FINISHED)

    return Ledger()
