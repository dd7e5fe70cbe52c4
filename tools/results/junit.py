"""Test cases of a test.xml as pytest writes it (the runner's --junitxml, xunit1 family).

    for case in junit.cases(path):
        case.id, case.outcome, case.time_s, case.message

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

OUTCOMES = ("passed", "failed", "error", "skipped", "xfail", "xpass")
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

    @property
    def id(self) -> str:
        """Unique within a target: `classname::name`."""
        return f"{self.classname}::{self.name}" if self.classname else self.name

    @property
    def node_id(self) -> str | None:
        """pytest's node id (`file.py::Class::name`), from xunit1's file and classname."""
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


def cases(path: pathlib.Path) -> list[Case]:
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
COLUMNS = ("passed", "failed", "xfail", "declared", "n/a", "skipped")


def column(case: Case) -> str:
    if case.outcome in ("failed", "error", "xpass"):
        return "failed"
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
