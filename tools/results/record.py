"""The runner's typed record of one shard: what it saw, for every reader that is not a person.

The runner (tools/runner/pytest_runner.py) writes one record per shard into the shard's
test.xml, as the testsuite property `torch_test.record` (JSON), so it travels wherever Bazel
keeps test.xml: the local cache, a remote cache, a remote worker's outputs. Log lines stay for
people; no reader parses them. The gate, tools/update_test_times.py and the benches read this.

    rec = record.read(path_to_test_xml)      # None: no record (not our runner, or a crash
                                             # before it wrote one)
    rec.verdict, rec.cases["test_x.py::T::test_a"].outcome, rec.lease.wait_s, ...

Case ids are the source's path as the target names it, then pytest's id: `dir/test_x.py::T::
test_a[p]` (a packed target may hold two files of one name in two folders). A subtest (unittest's
subTest, pytest's subtests fixture) is a case of its own, its case's id, a space and pytest's
description of it: `test_x.py::T::test_a (i=2)`, `test_x.py::test_b [msg] (i=1)`; a failing
subtest fails its case too. A source file that yields no case is one, keyed by the file alone
(`dir/test_x.py`): `failed` where its import failed, `skipped` where it skipped itself at import.

Case outcomes are what the runner's witness saw the case do (tools/runner/witness.py), not what
pytest reported:
  passed          its body was entered and returned, every phase clean; with `declared`, a case
                  that expects to fail (xfail, unittest.expectedFailure) and passed, as its
                  expectations file declares (outcome = "pass")
  failed          it raised, or a phase (setup, teardown) did, or a thread it started did, or it
                  left a coroutine unawaited, or it passed where a failure was expected
  xfail           an expected failure (xfail marker, unittest.expectedFailure) that ran and raised
  declared_fail   a failure its expectations file declares, with the text the match accepted
  declared_skip   a skip its expectations file declares
  quarantined     a failure a flaky entry of its expectations file accepts (outcome = "flaky",
                  before its `until`): detail the failure's text and the entry's issue
  not_applicable  placed by torch's decorators on hardware no variant offers, and skipped so
  skipped         a skip nothing declares (it fails the target)
  never_ran       the inventory holds it for this shard, and no body of it was seen
Cases another shard ran, or the user's own filter left out, are not in `cases`.

A case a flaky entry names carries that entry in `quarantine` whatever its outcome (`passed`,
`quarantined`, or `failed`: it failed otherwise, or the entry expired), so a reader counts its
failures over runs against the rate the entry states:
  {"entry": 2, "test": "test_x.py::T::test_a", "issue": "https://...", "until": "2027-03-31"
   or "2.16", "rate": 0.05}

What the body did is kept apart from the verdict where they part: a case whose body passed
where a declaration (the expectations file) or a marker (xfail, unittest.expectedFailure)
expected a failure or a skip is `failed` (its expectation is stale), and its `stale` names that
expectation, so a reader (the upgrade gate: a fix, not a regression) tells "it passed against a
stale expectation" from a failure without reading the detail's wording:
  {"by": "marker"}                                   an xfail marker or expectedFailure
  {"by": "expectations", "entry": 3, "test": "test_x.py::T::test_a", "outcome": "fail",
   "torch": ["2.15"] or None}                        [[expect]] #3 of the shard's `expectations`
The shard's `expectations` is the target's expectations file (workspace-relative), and its
`infrastructure` says why no test ran where the host could not give the variant what it needs
(no GPU visible, fewer GPUs than it needs, no lease within the timeout: tools/runner/gpu_lease.py).

Standard library only: the runner's own process and the gate import it.
"""

import dataclasses
import json
import pathlib
import xml.etree.ElementTree as ET

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["Case", "FAILED", "SKIPPED"]

PROPERTY = "torch_test.record"
SCHEMA = 1

PASSED, FAILED, XFAIL = "passed", "failed", "xfail"
DECLARED_FAIL, DECLARED_SKIP, QUARANTINED = "declared_fail", "declared_skip", "quarantined"
NOT_APPLICABLE, SKIPPED, NEVER_RAN = "not_applicable", "skipped", "never_ran"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What every reader needs to know of an outcome: the one table of them (a new outcome is
    a row here)."""

    green: bool  # it leaves its target green
    ran: bool  # its body ran to an end (a pass or a failure): a gate compares it
    raised: bool  # its body raised: a pass on the other side is a fix
    kind: str | None  # the expectation that accepts it (its `declared` names why), or None
    column: str  # the column reports count it in


TABLE = {
    PASSED: Outcome(True, True, False, None, "passed"),
    FAILED: Outcome(False, True, True, None, "failed"),
    XFAIL: Outcome(True, True, True, None, "xfail"),
    DECLARED_FAIL: Outcome(True, True, True, "fail", "declared"),
    DECLARED_SKIP: Outcome(True, False, False, "skip", "declared"),
    QUARANTINED: Outcome(True, True, True, "flaky", "declared"),
    NOT_APPLICABLE: Outcome(True, False, False, "not applicable", "n/a"),
    SKIPPED: Outcome(False, False, False, None, "skipped"),
    NEVER_RAN: Outcome(False, False, False, None, "never ran"),
}
OUTCOMES = tuple(TABLE)
GREEN = tuple(o for o, t in TABLE.items() if t.green)
COLUMNS = tuple(dict.fromkeys(t.column for t in TABLE.values()))
# How a not_applicable case's skip reason begins (the session plugin's skip; the runner's
# verdict and the outcome audit read it).
NOT_APPLICABLE_PREFIX = "not applicable to this hardware table: "


@dataclasses.dataclass
class Case:
    outcome: str
    detail: str = ""  # `Type: message` of a failure, a skip's reason, what a declaration matched
    declared: str | None = None  # the declaration's reason, where one accepted the outcome
    stale: dict | None = None  # the body passed against this expectation (above)
    quarantine: dict | None = None  # the flaky entry that names the case (above)

    @property
    def of(self) -> Outcome:
        return TABLE[self.outcome]

    @property
    def declaration(self) -> str | None:
        """`kind: why` of the expectation that accepts the outcome (`fail: bug 7`, `not
        applicable: needs mps`), None where none does."""
        kind = self.of.kind
        return f"{kind}: {self.declared or self.detail}" if kind else None

    @property
    def message(self) -> str:
        """The first line a person reads: a declaration's reason where one accepted it."""
        if self.outcome in (DECLARED_FAIL, DECLARED_SKIP) and self.declared:
            return f"declared: {self.declared}"
        text = self.detail.strip()
        return text.splitlines()[0] if text else ""


@dataclasses.dataclass
class Lease:
    gpus: list[int]
    wait_s: float
    shared: bool
    reason: str  # why shared or whole (tools/runner/gpu_share.py)
    share: float = 1.0  # the part of each leased GPU it held: slots taken / slots per GPU


@dataclasses.dataclass
class Resources:
    wall_s: float
    cpu_s: float
    peak_rss_mib: int
    children_peak_rss_mib: int


@dataclasses.dataclass
class ShardRecord:
    verdict: str = FAILED  # "passed" or "failed": the target's exit status, as the runner set it
    problems: list[str] = dataclasses.field(default_factory=list)  # why it failed, for people
    cases: dict[str, Case] = dataclasses.field(default_factory=dict)
    never_collected: list[str] = dataclasses.field(default_factory=list)  # definitions, no case
    last_started: str | None = None  # the last case whose test protocol began
    interrupted: str | None = None  # the case running when a SIGTERM (Bazel's timeout) came
    interrupted_stack: str | None = None  # that case's thread's stack, innermost frames last
    lease: Lease | None = None
    gpu_peak_mib: int | None = None  # per GPU, the test's whole process tree
    resources: Resources | None = None
    expectations: str | None = None  # the target's expectations file, workspace-relative
    infrastructure: str | None = None  # why the host ran no test (a GPU lease refused), or None
    schema: int = SCHEMA

    @property
    def never_run(self) -> list[str]:
        return sorted(c for c, case in self.cases.items() if case.outcome == NEVER_RAN)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ShardRecord":
        raw = json.loads(text)
        if raw.get("schema") != SCHEMA:
            raise ValueError(f"record schema {raw.get('schema')!r}, this reader knows {SCHEMA}")
        raw["cases"] = {k: Case(**v) for k, v in raw.get("cases", {}).items()}
        unknown = {c.outcome for c in raw["cases"].values()} - set(TABLE)
        if unknown:
            raise ValueError(f"record outcomes {sorted(unknown)}, this reader knows {OUTCOMES}")
        if raw.get("lease") is not None:
            raw["lease"] = Lease(**raw["lease"])
        if raw.get("resources") is not None:
            raw["resources"] = Resources(**raw["resources"])
        return cls(**raw)


def read(xml: pathlib.Path | str | None) -> ShardRecord | None:
    """The record in a shard's test.xml, or None (no file, or no record in it)."""
    if xml is None or not pathlib.Path(xml).is_file():
        return None
    try:
        root = ET.parse(xml).getroot()
    except ET.ParseError:
        return None
    for prop in root.iter("property"):
        if prop.get("name") == PROPERTY:
            return ShardRecord.from_json(prop.get("value") or "")
    return None


def write(xml: pathlib.Path | str, rec: ShardRecord, suite_name: str = "pytest") -> None:
    """Puts `rec` into the test.xml at `xml` (its first testsuite), creating a minimal one
    where pytest wrote none (it crashed, or never started)."""
    path = pathlib.Path(xml)
    try:
        tree = ET.parse(path)
        root = tree.getroot()
    except (OSError, ET.ParseError):
        root = ET.Element("testsuites")
        tree = ET.ElementTree(root)
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        suite = ET.SubElement(root, "testsuite", name=suite_name, tests="0")
    props = suite.find("properties")
    if props is None:
        props = ET.Element("properties")
        suite.insert(0, props)
    for old in [p for p in props if p.get("name") == PROPERTY]:
        props.remove(old)
    ET.SubElement(props, "property", name=PROPERTY, value=rec.to_json())
    tmp = path.with_name(path.name + ".tmp")
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)
