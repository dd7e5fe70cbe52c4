"""Test cases of a shard's test.xml: the one reader of per-case outcomes.

    for c in junit.cases(path):
        c.node_id, c.case.outcome, c.time_s        # c.case: a record.Case

A case is the runner's record.Case (record.py), whatever pytest reported; pytest's entries add
only their seconds, matched by node id. Without a record (a run saved before the runner wrote
one), pytest's own JUnit is converted into record.Case here, and nowhere else:
  no child element                   passed (also a non-strict xfail that passed)
  <failure>, <error>                 failed
  <skipped>                          skipped
  <skipped type="pytest.xfail">      xfail: an expected failure that failed
  an unexpected success              failed, its marker stale ({"by": "marker"}): <failure>
                                     "[XPASS(strict)] ..." or "Unexpected success", or <skipped>
                                     "xfail-marked test passes unexpectedly" (older pytest)
and the case's JUnit properties (tools.runner.session.outcome_audit wrote them):
`torch_test.declared` ("skip: <reason>" / "fail: <reason>") makes a skip declared_skip and an
xfail declared_fail, a pass failed against a stale expectation, and any other outcome one
that says it did not match; `torch_test.not_applicable` makes a skip not_applicable.

A testcase without a name is no test: pytest writes one when the session is interrupted (the
runner's SIGTERM handler, i.e. a Bazel timeout); cases() leaves it out.
"""

import dataclasses
import pathlib
import xml.etree.ElementTree as ET

from tools.results import record

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["cases"]

_XPASS_PREFIXES = ("[XPASS(strict)]", "Unexpected success", "xfail-marked test passes unexpectedly")
_DECLARED = "torch_test.declared"
_NOT_APPLICABLE = "torch_test.not_applicable"


@dataclasses.dataclass(frozen=True)
class Case:
    node_id: str  # pytest's (`file.py::Class::name`), as the record names the case
    case: record.Case
    time_s: float = 0.0  # pytest's seconds for it (0 where pytest reported none)

    @property
    def id(self) -> str:
        """Unique within a target: `classname::name`."""
        return case_id(self.node_id)

    @property
    def name(self) -> str:
        return _parts(self.node_id)[2]


def _parts(node_id: str) -> tuple[str, str, str]:
    """(file, xunit1 classname, name) of a node id."""
    head, bracket, params = node_id.partition("[")  # a parameter id may hold "::"
    file, *classes = head.split("::")
    name = classes.pop() + bracket + params if classes else ""
    module = file.removesuffix(".py").replace("/", ".")
    return file, ".".join([module, *classes]), name


def case_id(node_id: str) -> str:
    """The id (`classname::name`) of the case a node id names."""
    _, classname, name = _parts(node_id)
    return f"{classname}::{name}"


def _node_id(element: ET.Element) -> str:
    """pytest's node id from xunit1's file and classname (`classname::name` without a file)."""
    file, classname, name = (element.get(k, "") for k in ("file", "classname", "name"))
    if not file.endswith(".py"):
        return f"{classname}::{name}" if classname else name
    module = file[: -len(".py")].replace("/", ".")
    inner = classname[len(module) :].strip(".") if classname.startswith(module) else ""
    return "::".join([file, *filter(None, inner.split(".")), name])


def _pytest_outcome(element: ET.Element) -> tuple[record.Case, str | None]:
    """The case as pytest's JUnit encodes it, and pytest's own name for a mismatch's text."""
    for tag in ("failure", "error", "skipped"):
        child = element.find(tag)
        if child is None:
            continue
        message = (child.get("message") or (child.text or "")).strip()
        first = message.splitlines()[0] if message else ""
        if first.startswith(_XPASS_PREFIXES):
            return record.Case(record.FAILED, first, stale={"by": "marker"}), "xpass"
        if tag != "skipped":
            return record.Case(record.FAILED, first), tag if tag == "error" else None
        if child.get("type") == "pytest.xfail":
            return record.Case(record.XFAIL, first), None
        return record.Case(record.SKIPPED, first), None
    return record.Case(record.PASSED), None


def _converted(element: ET.Element) -> record.Case:
    """A case of a run saved before the record, as the record would have it."""
    case, said = _pytest_outcome(element)
    props = {p.get("name"): p.get("value") for p in element.iter("property")}
    if props.get(_NOT_APPLICABLE) and case.outcome == record.SKIPPED:
        return record.Case(record.NOT_APPLICABLE, props[_NOT_APPLICABLE])
    if not props.get(_DECLARED):
        return case
    kind, _, why = props[_DECLARED].partition(": ")  # the property's own form, kind first
    accepted = {
        ("skip", record.SKIPPED): record.DECLARED_SKIP,
        ("fail", record.XFAIL): record.DECLARED_FAIL,
    }
    if (kind, case.outcome) in accepted:
        return record.Case(accepted[kind, case.outcome], case.detail, why)
    if case.outcome == record.PASSED:
        stale = {"by": "expectations", "outcome": kind}
        return record.Case(record.FAILED, f"declared {kind} ({why}), but it passed", stale=stale)
    it = said or case.outcome
    detail = f"declared {kind}: {why}, but it {it}" + (f": {case.detail}" if case.detail else "")
    return dataclasses.replace(case, detail=detail)


def _reported(path: pathlib.Path) -> list[tuple[ET.Element, str]]:
    """pytest's testcase elements, with their node ids."""
    found = []
    for element in ET.parse(path).getroot().iter("testcase"):
        if element.get("name"):  # else pytest's record of an interrupted session, not a test
            found.append((element, _node_id(element)))
    return found


def cases(path: pathlib.Path) -> list[Case]:
    reported = _reported(path)
    rec = record.read(path)
    if rec is None:
        return [Case(n, _converted(e), float(e.get("time") or 0)) for e, n in reported]
    seconds = {n: float(e.get("time") or 0) for e, n in reported}
    return [Case(n, seen, seconds.get(n, 0.0)) for n, seen in rec.cases.items()]


def counts(paths) -> dict[str, int]:
    """Cases per report column (record.COLUMNS) over these test.xml files, zeros included."""
    found = dict.fromkeys(record.COLUMNS, 0)
    for path in paths:
        for c in cases(path):
            found[c.case.of.column] += 1
    return found


def shard_counts(xml: pathlib.Path | None) -> dict[str, int]:
    """The columns one shard's test.xml has cases in; {} without one (a crash, a SKIPPED target)."""
    found = counts([xml] if xml is not None and xml.is_file() else [])
    return {k: v for k, v in found.items() if v}
