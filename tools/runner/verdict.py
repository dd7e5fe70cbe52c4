"""The target's verdict, computed by the runner from what it saw, not from what pytest said.

Inputs, none of them pytest's reports:
  the inventory   every case the source defines for this variant, with what it expects of
                  itself (an xfail marker, unittest.expectedFailure, a placement as not
                  applicable), collected apart from the test's configuration
                  (tools/runner/session/inventory.py)
  the ledger      which cases went to another shard or were left out by the user's own filter
                  (tools/runner/session/ledger.py)
  the witness     what each case's phases and body did, and its threads, coroutines and ranks
                  (tools/runner/process/witness.py)
  the expectations file, read here as the session reads it (tools/runner/session/expectations.py)

Each case of the variant that was neither excused nor seen is `never_ran`. A seen case is
judged by one rule (`judge`): a skip is green only where a declaration or the hardware table
accepts its reason; a failure (in any phase, in a thread, a coroutine left unawaited, a rank that
never returned) only where the source expects it (an xfail that ran and raised what it names) or
a declaration matches its `Type: message`; a body that never ran is never green; a case that
passed where a failure was expected or declared is a failure, unless a declared pass names it
(a case that expects to fail, passing on this torch); a quarantined case (a declared flaky)
is green where it passed or failed as its entry's match accepts, until the entry expires, and
red after; a failing subtest is a failure of its case's body. The outcome of every case, and
of every subtest as a case of its own, goes into the shard's typed record
(tools/results/record.py).
"""

import dataclasses
import os

from tools.results import record
from tools.results.record import (
    DECLARED_FAIL,
    DECLARED_SKIP,
    FAILED,
    NEVER_RAN,
    NOT_APPLICABLE,
    PASSED,
    QUARANTINED,
    SKIPPED,
    XFAIL,
)
from tools.runner.process import events
from tools.runner.session import expectations
from tools.runner.session.inventory import Inventory, Item


class Seen:
    """The witness's events of one case."""

    def __init__(self):
        self.begun = False
        self.phases: dict[str, dict | None] = {}
        self.entered = False
        self.returned = False
        self.raised: dict | None = None
        self.threads: list[str] = []
        self.unawaited: list[str] = []
        self.ranks: tuple[str, int] | None = None  # (unittest id, world size)
        self.ranks_seen: dict[int, str] = {}  # rank -> its body's last event
        self.subtests: dict[str, dict | None] = {}  # description -> its first failure, or None
        self.nodeid: str | None = None  # pytest's id of it, in the session that ran it


def cases_seen(received: list[dict]) -> tuple[dict[str, Seen], list[str], str | None]:
    """{case key: Seen}, findings outside any case, and the last case that began. An event the
    schema does not know (tools/runner/process/events.py) is a finding: it fails the target."""
    seen: dict[str, Seen] = {}
    outside: list[str] = []
    last = None
    rank_events: dict[str, dict[int, str]] = {}
    for ev in received:
        problem = events.check(ev)
        if problem is not None:
            outside.append(f"the witness sent {problem}")
            continue
        kind = ev["e"]
        if kind == events.RANK:
            rank_events.setdefault(ev["id"], {})
            if ev["what"] != "enter" or ev["rank"] not in rank_events[ev["id"]]:
                rank_events[ev["id"]][ev["rank"]] = ev["what"]
            continue
        if kind == events.PLUGIN:
            continue  # the runner's own (pytest_runner._plugin_problems)
        case = ev.get("case")
        if case is None:
            if kind == events.THREAD:
                outside.append(f"an exception in thread {ev['thread']}: {_text(ev['exc'])}")
            elif kind == events.UNAWAITED:
                outside.append(f"a coroutine never awaited: {ev['what']}")
            continue
        key = f"{case['path']}::{case['name']}"
        s = seen.setdefault(key, Seen())
        if kind == events.BEGIN:
            s.begun, s.nodeid, last = True, ev["nodeid"], key
        elif kind == events.PHASE:
            s.phases.setdefault(ev["when"], ev["exc"])
        elif kind == events.ENTER:
            s.entered = True
        elif kind == events.RETURN:
            s.returned = True
        elif kind == events.RAISE:
            s.raised = s.raised or ev["exc"]
        elif kind == events.THREAD:
            s.threads.append(f"in thread {ev['thread']}: {_text(ev['exc'])}")
        elif kind == events.UNAWAITED:
            s.unawaited.append(ev["what"])
        elif kind == events.RANKS:
            s.ranks = (ev["id"], int(ev["world"]))
        elif kind == events.SUB:
            # One description run twice (a loop without parameters) is one subtest: its
            # first failure stands.
            if s.subtests.get(ev["desc"]) is None:
                s.subtests[ev["desc"]] = ev["exc"]
    for s in seen.values():
        if s.ranks is not None:
            s.ranks_seen = rank_events.get(s.ranks[0], {})
    return seen, outside, last


def _text(exc: dict) -> str:
    return f"{exc['type']}: {exc['msg']}"


def _matches(entry, exc: dict) -> str | None:
    return entry.matched(_text(exc))


def judge(s: Seen, info: Item, entry) -> record.Case:
    """One case's outcome from what was seen of it, what it expects of itself (`info`, the
    inventory's) and its declaration (`entry`, or None). A failing subtest is a failure of
    its case's body, after which the body went on."""
    fail = record.Case
    if s.threads:
        return fail(FAILED, "an exception was raised in a thread: " + "; ".join(s.threads))
    if s.unawaited:
        return fail(
            FAILED,
            f"created a coroutine nobody awaited ({', '.join(s.unawaited)}): its body never ran "
            "(an async def behind a synchronous wrapper needs an async runner)",
        )
    setup, call, teardown = (s.phases.get(w) for w in ("setup", "call", "teardown"))
    body = s.raised if s.entered else None
    subs = _failed_subtests(s)
    skip = next((e for e in (setup, body, call) if e is not None and e["skip"]), None)
    if skip is not None and not subs:
        return _judge_skip(skip, info, entry, teardown)
    # pytest.xfail() called in setup or in the body (unittest's expectedFailure reaches pytest
    # as one too, after the body raised: that is no imperative xfail). Its body did not finish:
    # green only where a declared skip names it.
    for exc in (setup, body) if s.entered else (setup, call):
        if exc is not None and exc["xfail"]:
            if entry is not None and entry.outcome == "skip" and entry.matched(exc["msg"]):
                return record.Case(DECLARED_SKIP, entry.matched(exc["msg"]), entry.reason)
            return fail(FAILED, f"pytest.xfail() stopped it, its body unfinished: {exc['msg']}")
    # The body's failure: what it raised, else its first failing subtest (unittest's
    # expectedFailure then reports the case to pytest as an xfail: no failure of its own).
    inner = body if body is not None else (subs[0][1] if subs else None)
    failures = [e for e in (setup, inner or call, teardown) if e is not None]
    if not s.begun or "call" not in s.phases and not failures:
        return fail(NEVER_RAN, "its test protocol never ran")
    if not failures and not s.entered:
        return fail(FAILED, "its body never ran (something reported a result without calling it)")
    if not failures and s.entered and not s.returned:
        return fail(FAILED, "its body never returned (the process left it)")
    if entry is not None and entry.outcome == "pass":
        return _judge_pass(s, entry, failures, body)
    if entry is not None and entry.outcome == "flaky":
        return _judge_quarantine(s, entry, failures, subs)
    expected = info.xfail
    if failures:
        first = failures[0]
        if expected is not None and inner is not None and first is inner and teardown is None:
            raises = expected.get("raises")
            if raises is None or set(raises) & set(inner["mro"]):
                return record.Case(XFAIL, _text(inner))
        if entry is not None and entry.outcome == "fail":
            matched = _matches(entry, first)
            # Every failing subtest is the declared failure, or the case has another.
            later = [e for e in failures[1:] if e is not first]
            later += [exc for _, exc in subs if exc is not first and _matches(entry, exc) is None]
            if matched is not None and not later:
                return record.Case(DECLARED_FAIL, matched, entry.reason)
            after = None
            if later and later[0] is teardown:
                after = entry.teardown_matched(_text(teardown))
            if matched is not None and after is not None and len(later) == 1:
                return record.Case(DECLARED_FAIL, f"{matched}; then {after}", entry.reason)
            if matched is not None:
                return fail(FAILED, f"declared fail matched, then also: {_text(later[0])}")
            return fail(FAILED, f"{_text(first)} (declared fail: {entry.match!r} does not match)")
        if first is inner and body is None and subs:
            return fail(FAILED, f"subtest {subs[0][0]} failed: {_text(inner)}")
        return fail(FAILED, _text(first))
    ranks = _ranks_missing(s)
    if ranks:
        return fail(FAILED, ranks)
    # The body passed: the expectation is stale, and the record names it (record.Case.stale).
    if expected is not None:
        why = "expected to fail (xfail / expectedFailure), but it passed"
        return record.Case(FAILED, why, stale={"by": "marker"})
    if entry is not None:
        why = f"declared {entry.outcome} ({entry.reason}), but it passed"
        return record.Case(FAILED, why, stale=_stale(entry))
    return record.Case(PASSED)


def _failed_subtests(s: Seen) -> list[tuple[str, dict]]:
    """(description, failure) of each subtest that raised, skips aside, in the order run."""
    return [(d, exc) for d, exc in s.subtests.items() if exc is not None and not exc["skip"]]


def judge_subtests(s: Seen, case: record.Case, info: Item, entry) -> dict[str, record.Case]:
    """{description: outcome} of each subtest of a case judged `case`: a subtest is a case of
    its own in the record, so a gate compares it, whatever its siblings did."""
    out = {}
    for desc, exc in s.subtests.items():
        if exc is None:
            out[desc] = record.Case(PASSED)
        elif exc["skip"]:
            if case.outcome in (DECLARED_SKIP, NOT_APPLICABLE):
                out[desc] = dataclasses.replace(case)  # the case's own skip, declared so
            else:
                out[desc] = record.Case(SKIPPED, exc["msg"])
        elif case.outcome == XFAIL and info.xfail is not None:
            out[desc] = record.Case(XFAIL, _text(exc))
        elif case.outcome == DECLARED_FAIL and _matches(entry, exc) is not None:
            out[desc] = record.Case(DECLARED_FAIL, _matches(entry, exc), entry.reason)
        elif case.outcome == QUARANTINED and _matches(entry, exc) is not None:
            out[desc] = dataclasses.replace(case, detail=_quarantined(exc, entry))
        else:
            out[desc] = record.Case(FAILED, _text(exc))
    for sub in out.values():  # a quarantine's runs count every subtest's, passed or not
        sub.quarantine = case.quarantine
    return out


def _stale(entry) -> dict:
    """The declaration a passing body contradicts, as the record names it."""
    torch = list(entry.torch) if entry.torch else None
    return {
        "by": "expectations",
        "entry": entry.index,
        "test": entry.test,
        "outcome": entry.outcome,
        "torch": torch,
    }


def _judge_pass(s: Seen, entry, failures: list[dict], body) -> record.Case:
    """A declared pass (expectations.check_passes: of a case that expects to fail): green where
    the body returned and nothing failed but unittest's report of the unexpected success."""
    unexpected = [e for e in failures if not (e is failures[0] and _unexpected_success(e, body))]
    if unexpected:
        return record.Case(
            FAILED, f"{_text(unexpected[0])} (declared pass ({entry.reason}): it did not pass)"
        )
    if not (s.entered and s.returned):
        return record.Case(FAILED, "its body never returned (declared pass: it did not pass)")
    ranks = _ranks_missing(s)
    if ranks:
        return record.Case(FAILED, ranks)
    return record.Case(PASSED, "expected to fail, and passed as declared", entry.reason)


def _judge_quarantine(s: Seen, entry, failures: list[dict], subs) -> record.Case:
    """A declared flaky: red once its entry expired (expectations.expiry); else a pass is
    `passed` and a failure its match accepts (every failure of the case) `quarantined`, each
    with the entry's `quarantine`, so the gate counts them against its rate."""
    quarantine = entry.quarantine
    expired = expectations.expiry(entry)
    if expired is not None:
        return record.Case(FAILED, expired, quarantine=quarantine)
    if not failures:
        ranks = _ranks_missing(s)
        if ranks:
            return record.Case(FAILED, ranks, quarantine=quarantine)
        return record.Case(PASSED, quarantine=quarantine)
    first = failures[0]
    others = [e for e in failures[1:] if e is not first]
    others += [exc for _, exc in subs if exc is not first and _matches(entry, exc) is None]
    if _matches(entry, first) is None:
        why = f"{_text(first)} (quarantined: {entry.match!r} does not match)"
        return record.Case(FAILED, why, quarantine=quarantine)
    if others:
        why = f"quarantined failure matched, then also: {_text(others[0])}"
        return record.Case(FAILED, why, quarantine=quarantine)
    return record.Case(QUARANTINED, _quarantined(first, entry), entry.reason, quarantine=quarantine)


def _quarantined(exc: dict, entry) -> str:
    """A quarantined failure's detail: its text, and where the flakiness is tracked."""
    return f"{_text(exc)} (quarantined: {entry.issue})"


def _unexpected_success(exc: dict, body) -> bool:
    """`exc` is pytest's failure of unittest's unexpected success, after a body that returned."""
    # pytest.fail's exception: its __module__ says "builtins" (witness._outcomes).
    failed = exc["type"].rsplit(".", 1)[-1] == "Failed"
    return body is None and failed and exc["msg"].startswith(expectations.UNEXPECTED_SUCCESS)


def _judge_skip(skip: dict, info: Item, entry, teardown) -> record.Case:
    reason = skip["msg"]
    if teardown is not None:
        return record.Case(FAILED, f"skipped, then its teardown raised {_text(teardown)}")
    na = info.not_applicable
    if na is not None and reason.startswith(record.NOT_APPLICABLE_PREFIX):
        return record.Case(NOT_APPLICABLE, reason.removeprefix(record.NOT_APPLICABLE_PREFIX))
    if entry is not None and entry.outcome == "skip":
        matched = entry.matched(reason)
        if matched is not None:
            return record.Case(DECLARED_SKIP, matched, entry.reason)
        return record.Case(SKIPPED, f"{reason} (declared skip: {entry.match!r} does not match)")
    return record.Case(SKIPPED, reason)


def _ranks_missing(s: Seen) -> str | None:
    """Why the ranks a passing case started do not prove it, or None."""
    if s.ranks is None:
        return None
    _, world = s.ranks
    got = s.ranks_seen
    missing = [r for r in range(world) if got.get(r) != "return"]
    if not missing:
        return None
    how = ", ".join(f"rank {r}: {got.get(r, 'never started its body')}" for r in missing)
    return f"{len(missing)} of {world} ranks never returned from the test body ({how})"


def shard_record(
    inventory: Inventory,
    excused: set[str],
    received: list[dict],
    entries: list,
    variant: str,
    root: str,
) -> record.ShardRecord:
    """The shard's record: every case of `variant` in the inventory, less `excused`, judged."""
    seen, outside, last = cases_seen(received)
    ours = {
        key: info
        for key, info in inventory.items.items()
        if info.variant == variant and key not in excused
    }
    # A case the session ran that the inventory lacks (made by the target's args or ini file:
    # a plugin they name, `python_functions`) is judged too: it expects nothing of itself, so
    # only a real pass of it is green.
    unknown = Item(variant, {}, None, None)
    ours.update({key: unknown for key, s in seen.items() if s.begun and key not in ours})
    declared, _ = expectations.assign(entries, sorted(ours))
    expectations.check_passes(declared, {key: info.xfail for key, info in ours.items()})
    rec = record.ShardRecord()
    for key, info in sorted(ours.items()):
        s = seen.get(key, Seen())
        entry = declared.get(key)
        # pytest's own id where the session ran it (test.xml's), else the path from here.
        name = s.nodeid or display(key, root)
        rec.cases[name] = case = judge(s, info, entry)
        for desc, sub in judge_subtests(s, case, info, entry).items():
            rec.cases[f"{name} {desc}"] = sub
    # A file that yields no case is a case of its own: its import failed, or it skipped itself.
    for path, (outcome, text) in sorted(inventory.unloaded.items()):
        why = "could not be imported" if outcome == FAILED else "skipped at import"
        rec.cases[display(path, root)] = record.Case(outcome, f"{why}: {text}")
    rec.never_collected = [f"{display(k, root)} ({what})" for k, what in inventory.uncollected]
    rec.last_started = (seen[last].nodeid or display(last, root)) if last else None
    for finding in outside:
        rec.problems.append(f"outside any test: {finding}")
    return rec


def display(key: str, root: str) -> str:
    """A case key (`/abs/dir/test_x.py::T::test_a`) relative to the runner's directory."""
    path, sep, name = key.partition("::")
    return os.path.relpath(path, root) + sep + name


def problems(rec: record.ShardRecord) -> list[str]:
    """Lines for people: every case that leaves the target red, and why."""
    lines = []
    for case, c in rec.cases.items():
        if c.outcome == NEVER_RAN:
            lines.append(f"defined but never ran: {case}")
        elif c.outcome not in record.GREEN:
            lines.append(f"{c.outcome}: {case}: {c.detail}")
    if rec.never_run:
        last = rec.last_started
        lines.append(f"the last test that started: {last}" if last else "no test had started")
    lines += [f"defined but never collected by pytest: {u}" for u in rec.never_collected]
    return lines + rec.problems
