"""The witness's events have one schema (tools/runner/process/events.py): a kind renamed or a
field dropped on one side only fails loudly, on the sending side and on the reading side. So do
the inventory's file (session/inventory.py) and the ledger's lines (session/ledger.py)."""

import ast
import json
import pathlib

import pytest

from tools.results import record
from tools.runner import completion, verdict
from tools.runner.process import events
from tools.runner.session import inventory, ledger

ROOT = pathlib.Path(__file__).resolve().parents[3]
SENDERS = ["tools/runner/process/witness.py", "tools/runner/session/plugin.py"]


def _kinds_sent(path: pathlib.Path) -> set[str]:
    """The kinds a sender's `send(events.KIND, ...)` calls name."""
    sent = set()
    for node in ast.walk(ast.parse(path.read_text())):
        func = node.func if isinstance(node, ast.Call) else None
        ours = isinstance(func, ast.Name) and func.id == "send"  # witness.py's own calls
        ours |= (
            isinstance(func, ast.Attribute)
            and func.attr == "send"
            and (isinstance(func.value, ast.Name) and func.value.id == "witness")
        )
        if ours:
            first = node.args[0] if node.args else None
            assert isinstance(first, ast.Attribute) and first.value.id == "events", (
                f"{path.name}:{node.lineno}: send() names its kind through tools.runner.process."
                "events, not a literal"
            )
            sent.add(getattr(events, first.attr))
    return sent


def test_every_kind_sent_is_one_the_schema_defines_and_every_one_is_sent():
    sent = set().union(*(_kinds_sent(ROOT / p) for p in SENDERS))
    assert sent == set(events.FIELDS)


def test_a_kind_the_schema_lacks_is_refused_when_sent():
    with pytest.raises(events.UnknownEvent, match="'begun'"):
        events.event("begun", {"nodeid": "t.py::test_a"})
    with pytest.raises(events.UnknownEvent, match="missing \\['nodeid'\\]"):
        events.event(events.BEGIN, {})
    with pytest.raises(events.UnknownEvent, match="unknown \\['node'\\]"):
        events.event(events.BEGIN, {"nodeid": "x", "node": "x"})


def test_a_kind_the_schema_lacks_fails_the_verdict_when_received():
    case = {"path": "/w/t.py", "name": "test_a"}
    received = [
        {"e": "begin", "pid": 1, "case": case, "nodeid": "t.py::test_a"},
        {"e": "returned", "pid": 1, "case": case},  # a sender renamed "return"
    ]
    _, outside, _ = verdict.cases_seen(received)
    assert outside == [
        "the witness sent an event of unknown kind 'returned' (tools/runner/process/events.py)"
    ]
    _, outside, _ = verdict.cases_seen([{"e": "phase", "pid": 1, "case": case, "when": "call"}])
    assert outside == [
        "the witness sent event 'phase': missing ['exc'], unknown [] "
        "(tools/runner/process/events.py)"
    ]


def test_the_inventory_reads_what_it_writes_and_refuses_a_renamed_key(tmp_path):
    item = inventory.Item("cpu", {"p": "1"}, None, "needs mps")
    written = inventory.Inventory({"/w/t.py::test_a": item}, [], {"/w/u.py": ["skipped", "x"]})
    assert inventory.Inventory.from_json(written.to_json()) == written
    raw = json.loads(written.to_json())
    raw["items"]["/w/t.py::test_a"]["not_aplicable"] = raw["items"]["/w/t.py::test_a"].pop(
        "not_applicable"
    )
    with pytest.raises(ValueError, match="not_aplicable"):
        inventory.Inventory.from_json(json.dumps(raw))
    raw = json.loads(written.to_json())
    raw["not_loaded"] = raw.pop("unloaded")
    with pytest.raises(ValueError, match="not_loaded"):
        inventory.Inventory.from_json(json.dumps(raw))


def test_a_ledger_line_of_a_kind_the_writer_lacks_fails_its_reader():
    kinds = (ledger.SELECTED, ledger.ELSEWHERE, ledger.FILTERED, ledger.START)
    read = completion.Record("".join(f"{k} t.py::test_a\n" for k in kinds) + "session_finished\n")
    assert (read.selected, read.excused, read.session_finished) == (
        ["t.py::test_a"],
        {"t.py::test_a"},
        True,
    )
    with pytest.raises(ValueError, match="'started t.py::test_a'"):
        completion.Record("started t.py::test_a\n")  # a writer renamed "start"


def test_a_record_of_an_outcome_the_reader_lacks_is_refused():
    rec = record.ShardRecord(cases={"t.py::test_a": record.Case("passed")})
    renamed = rec.to_json().replace('"passed"', '"pass"')
    with pytest.raises(ValueError, match="'pass'"):
        record.ShardRecord.from_json(renamed)
