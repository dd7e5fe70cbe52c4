"""Dynamo test helpers: a clean compiler state per test, and ways to observe what dynamo did.

Uses only torch._dynamo's own modules (no torch.testing._internal), so tests also run on images
without `expecttest`.
"""

import collections
import contextlib
import logging
import re
import unittest

import torch
import torch._dynamo
import torch._dynamo.testing
import torch._dynamo.utils
import torch._logging


class DynamoTestCase(unittest.TestCase):
    """Resets dynamo around every test, so frame counts and caches start from zero.

    Errors inside dynamo raise instead of falling back to eager (suppress_errors=False), so a
    test cannot pass by silently not compiling. Unlike torch's own dynamo TestCase this does not
    turn on `nested_graph_breaks`: tests see the configuration users get by default.
    """

    def setUp(self):
        super().setUp()
        self._dynamo_config = torch._dynamo.config.patch(suppress_errors=False)
        self._dynamo_config.__enter__()
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()

    def tearDown(self):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        self._dynamo_config.__exit__(None, None, None)
        super().tearDown()


def compile_counter() -> torch._dynamo.testing.CompileCounter:
    """A backend that runs graphs eagerly and counts frames (`frame_count`) and ops (`op_count`)."""
    return torch._dynamo.testing.CompileCounter()


def graph_break_types() -> collections.Counter:
    """Graph breaks dynamo recorded (since its counters were last cleared), counted by type.

    Dynamo writes every graph-break message with `exc.format_graph_break_message`: the break's
    type (its `gb_type` in torch's graph-break registry, e.g. "torch.* op returned non-Tensor")
    on the first line, then explanation, hints and debug context. Counting by type keeps a test
    independent of how the explanations are worded.
    """
    types = collections.Counter()
    for message, count in torch._dynamo.utils.counters["graph_break"].items():
        if count:
            types[message.splitlines()[0]] += count
    return types


class LogRecords(list):
    """Captured log records with convenience views."""

    def messages(self) -> list[str]:
        return [r.getMessage() for r in self]

    def text(self) -> str:
        return "\n".join(self.messages())

    def warnings(self) -> list[str]:
        return [r.getMessage() for r in self if r.levelno >= logging.WARNING]


@contextlib.contextmanager
def capture_logs(logger_name: str = "torch._dynamo", **artifacts):
    """Collect records of `logger_name` (and its children) while the block runs.

    Keyword arguments turn on torch logging artifacts for the duration, e.g.
    `capture_logs("torch._dynamo", recompiles=True)`; the previous settings are restored.
    """
    records = LogRecords()

    class _Collect(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = _Collect(level=logging.DEBUG)
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        if artifacts:
            torch._logging.set_logs(**artifacts)
        yield records
    finally:
        if artifacts:
            torch._logging.set_logs()
        logger.removeHandler(handler)


class GuardFailures(list):
    """Guard-failure reasons dynamo reported, one string per failed cache entry.

    Pass `.record` as `guard_fail_fn` to `torch._dynamo.optimize`.
    """

    def record(self, failure) -> None:
        self.append(failure.reason)


# A guard-failure reason starts with the failed compile's id, "<frame>/<compile>: ".
_REASON = re.compile(r"^\d+/\d+: ")


def recompile_reasons(records: LogRecords) -> list[str]:
    """Reason lines ('0/1: len(x) == 2  # ...') of the recompile messages in captured logs.

    Headers, user stack traces and verbose 'guard N failures:' lines are left out.
    """
    reasons = []
    for message in records.messages():
        if "triggered by the following guard failure" in message:
            lines = (line.strip().lstrip("- ").strip() for line in message.splitlines()[1:])
            reasons.extend(line for line in lines if _REASON.match(line))
    return reasons


# A verbose recompile message's header of one cache entry's failures.
_ENTRY = re.compile(r"^guard \d+ failures:$")


def failures_by_entry(message: str) -> dict[str, list[str]]:
    """A verbose recompile message as {compile id: [failing guards]}, one item per cache entry.

    'guard N failures:' starts an entry's block (recompiles_verbose); its reason lines are
    '- 0/1: len(x) == 2  # source comment', several failing guards of one entry on one line
    (`reason_guards`).
    """
    entries: dict[str, list[str]] = {}
    current = None
    for raw in message.splitlines()[1:]:
        line = raw.strip().lstrip("- ").strip()
        if _ENTRY.match(line):
            current = []
        elif current is not None and _REASON.match(line):
            compile_id = line.split(":", 1)[0]
            entries.setdefault(compile_id, current).extend(reason_guards(line))
    return entries


def reason_guards(reason: str) -> list[str]:
    """Every failing guard one cache entry's reason names, in the order dynamo checked them.

    In verbose mode dynamo reports each failing guard of an entry, joined by '; ' after the
    compile id: '0/0: 5 <= x.size()[0]  # src; 5 <= x.size()[1]  # src' gives
    ['5 <= x.size()[0]', '5 <= x.size()[1]']. Otherwise it stops at the first, a list of one.
    """
    return [guard_text(part) for part in reason.splitlines()[0].split("; ")]


def guard_text(reason: str) -> str:
    """The guard alone: '0/1: len(x) == 2   # source comment' -> 'len(x) == 2'."""
    first_line = reason.splitlines()[0]
    guard = _REASON.sub("", first_line, count=1)
    return guard.split("#")[0].strip()
