"""Test cases of a shard's test.xml: the one reader of per-case outcomes.

    for case in junit.cases(path):
        case.id, case.outcome, case.time_s, case.message

Where the runner's record is in the file (record.py), its cases are the cases and their outcome
is what the runner's witness saw them do, whatever pytest reported; pytest's entries add only
their seconds (matched by node id). The record's outcomes read as pytest's below: a declared
fail as xfail with `declared` "fail: <reason>", a quarantined failure as xfail with "flaky:
<reason>" (every case a flaky entry names keeps the record's `quarantine`), a declared skip as
skipped with "skip: <reason>",
not applicable as skipped with `not_applicable`, and `never_ran` (the inventory holds the case,
no body of it was seen) as itself; a case failed because its body passed against a stale
expectation keeps the record's `stale` (record.py). Without a record (a run saved before the
runner wrote one), pytest's own encoding is read.

Outcomes, from how pytest encodes them:
  passed   no child element (also a non-strict xfail test that passed: pytest writes a pass)
  failed   <failure>, except the two unexpected-success forms below
  error    <error> (setup/teardown errors, collection errors)
  skipped  <skipped>
  xfail    <skipped type="pytest.xfail">: an expected failure that failed
  xpass    an expected failure that passed and failed the run: <failure> "[XPASS(strict)] ..."
           (pytest xfail strict) or "Unexpected success" (unittest.expectedFailure), or
           <skipped> "xfail-marked test passes unexpectedly" (older pytest)

A testcase without a name is no test: pytest writes one when the session is interrupted (the
runner's SIGTERM handler, i.e. a Bazel timeout); cases() leaves it out.

A case's JUnit properties (pytest's item.user_properties, written by
tools.runner.session.outcome_audit)
say why an outcome is accepted: `declared` ("skip: <reason>" / "fail: <reason>", from the
target's expectations file; a declared failure reads as xfail) and `not_applicable` (the test
needs hardware no variant offers), so a gate can tell "declared" from "regressed".
"""

import dataclasses
import pathlib
import xml.etree.ElementTree as ET

from tools.results import record

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["Case", "cases"]

NEVER_RAN = "never_ran"
OUTCOMES = ("passed", "failed", "error", "skipped", "xfail", "xpass", NEVER_RAN)
_XPASS_PREFIXES = ("[XPASS(strict)]", "Unexpected success", "xfail-marked test passes unexpectedly")
_DECLARED = "torch_test.declared"
_NOT_APPLICABLE = "torch_test.not_applicable"


@dataclasses.dataclass(frozen=True)
class Case:
    classname: str
    name: str
    file: str
    outcome: str
    time_s: float
    message: str  # first line of the failure/error/skip message ("" when passed)
    declared: str | None = None  # "skip: <reason>" or "fail: <reason>"
    not_applicable: str | None = None  # why the hardware table cannot run it
    recorded_id: str | None = None  # the node id the runner's record names it by
    stale: dict | None = None  # the record's: the body passed against this expectation
    quarantine: dict | None = None  # the record's: the flaky entry that names the case

    @property
    def id(self) -> str:
        """Unique within a target: `classname::name`."""
        return f"{self.classname}::{self.name}" if self.classname else self.name

    @property
    def node_id(self) -> str | None:
        """pytest's node id (`file.py::Class::name`): the record's, else from xunit1's file and
        classname."""
        if self.recorded_id is not None:
            return self.recorded_id
        if not self.file.endswith(".py"):
            return None
        module = self.file[: -len(".py")].replace("/", ".")
        inner = (
            self.classname[len(module) :].strip(".") if self.classname.startswith(module) else ""
        )
        return "::".join([self.file, *filter(None, inner.split(".")), self.name])


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag in ("failure", "error", "skipped"):
        child = case.find(tag)
        if child is None:
            continue
        message = child.get("message") or (child.text or "").strip()
        first = message.strip().splitlines()[0] if message.strip() else ""
        if first.startswith(_XPASS_PREFIXES):
            return "xpass", first
        if tag == "failure":
            return "failed", first
        if tag == "error":
            return "error", first
        return ("xfail" if child.get("type") == "pytest.xfail" else "skipped"), first
    return "passed", ""


def _parts(node_id: str) -> tuple[str, str, str]:
    """(file, xunit1 classname, name) of a node id: Case.node_id read backwards."""
    head, bracket, params = node_id.partition("[")  # a parameter id may hold "::"
    file, *classes = head.split("::")
    name = classes.pop() + bracket + params if classes else ""
    module = file.removesuffix(".py").replace("/", ".")
    return file, ".".join([module, *classes]), name


def case_id(node_id: str) -> str:
    """The id (`classname::name`) of the case a node id names."""
    _, classname, name = _parts(node_id)
    return f"{classname}::{name}"


def _witnessed(node_id: str, seen: record.Case, reported: Case | None) -> Case:
    """A case as the runner's record has it; pytest's entry (if any) gives its seconds."""
    why = seen.declared or seen.detail
    outcome, declared, not_applicable = {
        "declared_fail": ("xfail", f"fail: {why}", None),
        "quarantined": ("xfail", f"flaky: {seen.declared}", None),
        "declared_skip": ("skipped", f"skip: {why}", None),
        "not_applicable": ("skipped", None, seen.detail),
    }.get(seen.outcome, (seen.outcome, None, None))
    file, classname, name = _parts(node_id)
    if reported is not None:
        file, classname, name = reported.file, reported.classname, reported.name
    return Case(
        classname=classname,
        name=name,
        file=file,
        outcome=outcome,
        time_s=reported.time_s if reported else 0.0,
        message=_message(seen),
        declared=declared,
        not_applicable=not_applicable,
        recorded_id=node_id,
        stale=seen.stale,
        quarantine=seen.quarantine,
    )


def _message(seen: record.Case) -> str:
    """The first line a person reads: a declaration's reason where one accepted the outcome."""
    if seen.outcome in ("declared_fail", "declared_skip") and seen.declared:
        return f"declared: {seen.declared}"
    text = seen.detail.strip()
    return text.splitlines()[0] if text else ""


def cases(path: pathlib.Path) -> list[Case]:
    reported = _reported(path)
    rec = record.read(path)
    if rec is None:
        return reported
    by_node = {c.node_id: c for c in reported}
    return [_witnessed(n, seen, by_node.get(n)) for n, seen in rec.cases.items()]


def _reported(path: pathlib.Path) -> list[Case]:
    """The cases as pytest reported them."""
    found = []
    for case in ET.parse(path).getroot().iter("testcase"):
        if not case.get("name"):
            continue  # pytest's record of an interrupted session, not a test
        outcome, message = _outcome(case)
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        found.append(
            Case(
                classname=case.get("classname", ""),
                name=case.get("name", ""),
                file=case.get("file", ""),
                outcome=outcome,
                time_s=float(case.get("time") or 0),
                message=message,
                declared=properties.get(_DECLARED),
                not_applicable=properties.get(_NOT_APPLICABLE),
            )
        )
    return found


# How reports count cases: what was accepted by a declaration (expectations files) and what is
# not applicable to the hardware table apart from other skips, which fail their target.
COLUMNS = ("passed", "failed", "xfail", "declared", "n/a", "skipped", "never ran")


def column(case: Case) -> str:
    if case.outcome in ("failed", "error", "xpass"):
        return "failed"
    if case.outcome == NEVER_RAN:
        return "never ran"
    if case.outcome in ("skipped", "xfail") and case.declared:
        return "declared"
    if case.outcome == "skipped" and case.not_applicable:
        return "n/a"
    return case.outcome


def counts(paths) -> dict[str, int]:
    """Cases per column over these test.xml files (every column, zeros included)."""
    found = dict.fromkeys(COLUMNS, 0)
    for path in paths:
        for case in cases(path):
            found[column(case)] += 1
    return found


def shard_counts(xml: pathlib.Path | None) -> dict[str, int]:
    """The columns one shard's test.xml has cases in; {} without one (a crash, a SKIPPED target)."""
    found = counts([xml] if xml is not None and xml.is_file() else [])
    return {k: v for k, v in found.items() if v}
