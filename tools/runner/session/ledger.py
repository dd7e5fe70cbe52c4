"""The ledger the test process writes and the runner reads (tools/runner/completion.py says why).

One line per event, each one write(2) to an O_APPEND descriptor, so it is on disk however the
process ends:

    selected CASE          each test chosen for this variant and shard (after -k and sharding)
    elsewhere CASE         a test the shard selection gave to another shard
    filtered CASE          a test the user's own filter left out (-k, -m, --deselect, node ids)
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


def plugin(path: str, shards=None, node_ids=None):
    """The pytest plugin of the test process that writes the ledger at `path`.

    `shards`: the ShardSelector (its `elsewhere`); `node_ids`: the NodeIdSelector, if any.
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
            left_out = user_filter(config, node_ids)
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


def user_filter(config, node_ids):
    """left_out(item): True when the user's own selection excludes the item.

    Evaluated here with pytest's own matchers, not read from pytest_deselected, which any
    plugin or conftest can call for any item.
    """
    from _pytest.mark import KeywordMatcher, MarkMatcher
    from _pytest.mark.expression import Expression

    keyword = (config.option.keyword or "").lstrip()
    marks = config.option.markexpr or ""
    by_keyword = Expression.compile(keyword) if keyword else None
    by_mark = Expression.compile(marks) if marks else None
    prefixes = tuple(config.getoption("deselect") or [])
    wanted = node_ids.wanted if node_ids else None

    def left_out(item) -> bool:
        return bool(
            (by_keyword and not by_keyword.evaluate(KeywordMatcher.from_item(item)))
            or (by_mark and not by_mark.evaluate(MarkMatcher.from_markers(item.iter_markers())))
            or (prefixes and item.nodeid.startswith(prefixes))
            or (wanted is not None and item.nodeid not in wanted)
        )

    return left_out
