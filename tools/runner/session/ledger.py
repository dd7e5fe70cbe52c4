"""The ledger the test process writes and the runner reads (tools/runner/completion.py says why).

One line per event, written to a socket the test process inherits from the runner, whose other
end the runner reads as lines arrive (tools/runner/witness.py Stream): no path names it, so a
line written is the runner's however the process ends, and nothing can rewrite it afterwards:

    selected CASE          each test chosen for this variant and shard (after -k and sharding)
    elsewhere CASE         a test the shard selection gave to another shard
    filtered CASE          a test the user's own filter left out (user_filter.py)
    start NODEID           the test's setup begins
    session_finished       pytest's session ended (pytest_sessionfinish)
    collection JSON        a sharded target's collection, before any selection
                           (collection_record.describe)
    interrupted JSON       {"running": NODEID, "stack": ...} of a session Bazel's timeout
                           interrupted (child.py)

CASE is the runner's key of a case (collection_record.case_key), NODEID pytest's node id.

Only these two reasons for not running a test are written: the runner holds the ledger against
the source's inventory (tools/runner/session/inventory.py), and a test of the variant left out
for any other reason (a conftest's selection, say) fails the target as never run.
"""

import json
import os

from tools.runner.session.collection_record import case_key, describe

SELECTED, START, SESSION_FINISHED = "selected", "start", "session_finished"
ELSEWHERE, FILTERED = "elsewhere", "filtered"
COLLECTION, INTERRUPTED = "collection", "interrupted"


def write(fd: int, event: str, text: str = "") -> None:
    """One line `event text` to the ledger's descriptor `fd`, whole."""
    data = f"{event} {text}".rstrip().encode() + b"\n"
    while data:
        data = data[os.write(fd, data) :]


def plugin(fd: int, shards=None, user=None):
    """The pytest plugin of the test process that writes the ledger to descriptor `fd`.

    `shards`: the ShardSelector (its `elsewhere`); `user`: the session's UserFilter, if any.
    (A factory: the runner's own process reads the ledger and never imports pytest.)
    """
    import pytest

    class Ledger:
        """pytest plugin of the child process: records what was selected and started."""

        def _write(self, event: str, nodeid: str = "") -> None:
            write(fd, event, nodeid)

        @pytest.hookimpl(wrapper=True)
        def pytest_collection_modifyitems(self, config, items):
            collected = list(items)  # outermost: before any selection
            if shards and shards.total > 1:  # the shards' stability check (collection.py)
                self._write(COLLECTION, json.dumps(describe(collected)))
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

        def pytest_sessionfinish(self, session, exitstatus):
            self._write(SESSION_FINISHED)

    return Ledger()
