"""What a candidate changes against a baseline, per test case: the gate's comparison.

    before = snapshot(bep.read("baseline.json"))     # {label: TargetSnapshot}
    after = snapshot(bep.read("candidate.json"))
    result = compare(before, after, Thresholds())

Pure functions over results already on disk (tools/results reads them), so the self-tests
(test_gate.py) drive every category with fake test.xml pairs.

Outcomes are record.Case's (tools/results/record.py), read by junit.cases: the runner's
witness's, or pytest's JUnit converted (a run saved before records). Which outcomes ran, raised
or are accepted by a declaration is record.TABLE's; the categories below name them.

A case is compared as its body ran: one whose body passed where a stale expectation (a
declaration, an xfail marker: record.Case.stale) failed it counts as passed, the expectation
named in its item (`stale`; gate.py adds the edit that removes it).

Categories (a case is `label` + `classname::name`, over all shards):
  regressions        a case that passed on the baseline and did not pass on the candidate,
                     whatever explains it or either target's status: failed (an xpass too),
                     skipped, never ran, absent from a red target (a timeout or crash stopped
                     it), passed only on a retry (FLAKY), or an outcome a marker or declaration
                     accepts there: an xfail, a declared fail or skip, not applicable
                     (`newly_declared`: the gate names the release, --accept-declared moves it
                     to `declared`); a case that raised as accepted on the baseline (xfail,
                     declared fail, quarantined) and failed, was skipped or never ran; a case
                     new on the candidate that fails; a target green on the baseline and red or
                     FLAKY on the candidate with no case to show for it (crash, timeout, no
                     test.xml)
  declared           a case whose candidate outcome is the one its declaration accepts
                     (declared fail/skip, not applicable), declared on the baseline too or not
                     passing there: covered, not a regression; and every case a flaky entry
                     quarantines on the candidate that passed or failed as the entry accepts,
                     with its failures over the candidate's runs (`quarantine`,
                     tools/gate/quarantine.py): a regression instead where they exceed its
                     rate, or where it was no quarantine and passed on the baseline
  infra              not compared: the host or a side's build failed it (tools/gate/infra.py):
                     a case's failure text in infra's table on both sides, or on one side where
                     the sides' hardware or build kind differ (`differ`); every case of a side
                     that ran no test for the host's sake (a refused GPU lease, a lost remote
                     worker). Evidence on one side only on the same hardware and build kind
                     leaves the case to the rules here, marked `infra_suspect`
  fixes              a body that raised (failed, xfail, declared fail, quarantined) -> passed,
                     also against a stale expectation (an xpass): never a regression
  xfail_message_changes  xfail on both sides, with another failure (type or message)
  other_changes      any other outcome change (e.g. skipped -> passed)
  broken_both        failed on both sides (`first_run`: re-run on both, rates.py)
  flaky_both, not_decided  filled by the gate's re-runs (tools/gate/rates.py): a case whose
                     `first_run` marks it is moved to the list of its verdict (regressions,
                     fixes, flaky_both, broken_both, not_decided)
  new_cases, vanished_cases
  one_side           what did not run on both sides, with the reason (coverage): targets
                     SKIPPED or absent on one side, cases new or vanished or skipped (undeclared)
                     on one side or on both, that never ran on a side, absent from a side that
                     reported nothing, definitions never collected (the runner's record), a red
                     target no failing case explains
  skipped_one_side   targets SKIPPED on one side only (a package missing in one environment)
  durations          cases and targets slower/faster beyond both thresholds and beyond the
                     spread of each side's own runs (informational: builds and load differ)
  rss                peak RSS per target (the runner's record) beyond both
And `coverage`: targets and cases compared, i.e. that ran on both sides (a declared skip is
covered, not compared).
"""

import dataclasses

from tools.gate import infra, quarantine
from tools.results import bep, facts, junit, record

PASSED, FAILED, XFAIL = record.PASSED, record.FAILED, record.XFAIL
GOOD = tuple(o for o in record.GREEN if record.TABLE[o].ran)  # ran, and as accepted
RAISED = tuple(o for o, t in record.TABLE.items() if t.raised)
NOT_RUN = tuple(o for o, t in record.TABLE.items() if not t.ran)
COVERAGE_KEYS = ("one_side", "infra")  # what makes a verdict incomplete


@dataclasses.dataclass
class CaseResult:
    outcome: str
    time_s: float
    message: str
    log: str  # test.log of the shard that ran it
    node_id: str | None = None
    declared: str | None = None  # record.Case.declaration: what accepts its outcome, if any
    times: tuple = ()  # seconds in every final run (--runs_per_test), for the spread
    failed_attempts: int = 0  # earlier attempts (--flaky_test_attempts) in which it failed
    attempts: int = 1
    runs: int = 1  # final runs it ran in (--runs_per_test), and in how many of them it failed
    failed_runs: int = 0  # (an earlier attempt's failure fails its run: a retry hides none)
    failed_message: str = ""  # the first failed attempt's message and log
    failed_log: str = ""
    stale: dict | None = None  # its body passed against this expectation (record.Case.stale)
    # The flaky entry that names it (record.Case.quarantine), with `runs` and `failures`
    # counted over the final runs.
    quarantine: dict | None = None


@dataclasses.dataclass
class TargetSnapshot:
    status: str
    cached: bool
    duration_s: float
    peak_rss_mib: int | None
    cases: dict  # case id -> CaseResult
    logs: list  # test.log of every final shard/run
    first_error: str = ""  # why the target is red (facts.first_error), when it is
    hung: str | None = None  # node id of the test a SIGTERM (timeout) stopped
    stack: str = ""  # its stack, from the runner's record
    attempt_logs: list = dataclasses.field(default_factory=list)  # every attempt's test.log
    durations: tuple = ()  # seconds of each final run
    never_collected: tuple = ()  # what the source defines and yields no case (runner's record)
    expectations: str | None = None  # the target's expectations file (runner's record)
    infrastructure: dict | None = None  # a shard ran no test for the host's sake (infra.py)


@dataclasses.dataclass(frozen=True)
class Thresholds:
    duration_ratio: float = 0.25
    duration_s: float = 2.0
    rss_ratio: float = 0.25
    rss_mib: float = 256.0


def _read(path) -> str:
    return path.read_text(errors="replace") if path and path.is_file() else ""


def snapshot(targets: dict) -> dict:
    """TargetSnapshots from tools.results targets: test.xml cases, the runner's records."""
    snap = {}
    for label, target in targets.items():
        cases, peaks, errors, times = {}, [], [], {}
        hangs, never_collected, expectations, refused = [], set(), None, None
        quarantines, ran_in, failed_in = {}, {}, {}  # case id -> {run}
        final = target.final_attempts()
        for attempt in final:
            rec = facts.of(attempt)
            if (peak := facts.peak_rss_mib(rec)) is not None:
                peaks.append(peak)
            if hung := facts.hang(rec):
                hangs.append(hung)
            never_collected.update(rec.never_collected if rec else ())
            expectations = expectations or (rec.expectations if rec else None)
            refused = refused or infra.target_evidence(rec.infrastructure if rec else None)
            errors.append(facts.first_error(rec, _read(attempt.log)))
            if attempt.xml and attempt.xml.is_file():
                for c in junit.cases(attempt.xml):
                    seen = c.case
                    times.setdefault(c.id, []).append(c.time_s)
                    ran_in.setdefault(c.id, set()).add(attempt.run)
                    if seen.outcome == FAILED and not seen.stale:
                        failed_in.setdefault(c.id, set()).add(attempt.run)
                    if seen.quarantine is not None:
                        counted = quarantines.setdefault(
                            c.id, dict(seen.quarantine, runs=0, failures=0)
                        )
                        counted["runs"] += 1
                        counted["failures"] += seen.outcome != PASSED
                    old = cases.get(c.id)
                    # Over several runs a case keeps its worst outcome: one failure is a failure.
                    if old is None or (old.outcome in GOOD and seen.outcome not in GOOD):
                        cases[c.id] = CaseResult(
                            seen.outcome,
                            c.time_s,
                            seen.message,
                            str(attempt.log),
                            c.node_id,
                            seen.declaration,
                            stale=seen.stale,
                        )
        for case_id, result in cases.items():
            result.times = tuple(times[case_id])
            result.quarantine = quarantines.get(case_id)
        # Earlier attempts of a (shard, run) that Bazel retried (--flaky_test_attempts, flaky).
        earlier = [a for a in target.attempts if a not in final]
        for attempt in earlier:
            if attempt.xml and attempt.xml.is_file():
                for c in junit.cases(attempt.xml):
                    if c.id in cases:
                        result = cases[c.id]
                        result.attempts += 1
                        if c.case.outcome == FAILED:
                            failed_in.setdefault(c.id, set()).add(attempt.run)
                            result.failed_attempts += 1
                            result.failed_message = result.failed_message or c.case.message
                            result.failed_log = result.failed_log or str(attempt.log)
        for case_id, result in cases.items():
            result.runs = len(ran_in[case_id])
            result.failed_runs = len(failed_in.get(case_id, set()) & ran_in[case_id])
        refused = refused or infra.target_evidence(None, target.bazel_error)
        hung = hangs[0] if hangs else None
        red = target.status not in bep.GREEN and target.status != bep.SKIPPED
        snap[label] = TargetSnapshot(
            status=target.status,
            cached=target.cached,
            duration_s=round(target.duration_s, 2),
            peak_rss_mib=max(peaks) if peaks else None,
            cases=cases,
            logs=[str(p) for p in target.log_files()],
            first_error=next((e for e in errors if e), "") if red else "",
            hung=hung[0] if hung else None,
            stack=hung[1] if hung else "",
            attempt_logs=[str(a.log) for a in target.attempts if a.log and a.log.is_file()],
            durations=tuple(
                sum(a.duration_s for a in final if a.run == r)
                for r in sorted({a.run for a in final})
            ),
            never_collected=tuple(sorted(never_collected)),
            expectations=expectations,
            infrastructure=(
                {"cause": refused[0].name, "why": refused[0].why, "evidence": refused[1]}
                if refused
                else None
            ),
        )
    return snap


def _beyond(before: float, after: float, ratio: float, absolute: float, spread=0.0) -> bool:
    delta = after - before
    return abs(delta) >= max(absolute, spread) and abs(delta) >= ratio * max(before, 1e-9)


def _spread(values) -> float:
    return max(values) - min(values) if len(values) > 1 else 0.0


def _change(label, case_id, before, after) -> dict:
    return {
        "target": label,
        "case": case_id,
        "node_id": (after or before).node_id,
        "baseline": before.outcome if before else None,
        "candidate": after.outcome if after else None,
        "message": (after or before).message,
        "log": (after or before).log,
    }


def _hung_case(snap: TargetSnapshot) -> str | None:
    """The case id of the test a timeout stopped."""
    return junit.case_id(snap.hung) if snap.hung else None


def _absent(label, case_id, before, after_snap, after=None) -> dict:
    """A baseline case the red candidate target never ran (or never reported): stopped by a
    hang or crash."""
    change = _change(label, case_id, before, after)
    hung = _hung_case(after_snap)
    if hung == case_id:
        change["message"] = f"{after_snap.status}: this test was running when it was stopped"
        change["stack"] = after_snap.stack
    elif after_snap.hung:
        change["message"] = f"not reached: {after_snap.status} while running {after_snap.hung}"
    else:
        change["message"] = after_snap.first_error or f"target {after_snap.status}"
    change["log"] = after_snap.logs[0] if after_snap.logs else None
    return change


def compare(
    baseline: dict, candidate: dict, thresholds: Thresholds = Thresholds(), differ=None
) -> dict:
    """`differ`: how the sides' hardware or build kind differ (infra.difference), None where
    they are the same: an infra-like failure on one side only is infrastructure only then."""
    result = {
        key: []
        for key in (
            "regressions",
            "infra",
            "declared",
            "fixes",
            "xfail_message_changes",
            "other_changes",
            "new_cases",
            "vanished_cases",
            "broken_both",
            "flaky_both",
            "not_decided",
            "one_side",
            "skipped_one_side",
            "skipped_both",
            "durations",
            "rss",
        )
    }
    coverage = {"targets": 0, "targets_compared": 0, "cases_compared": 0}
    for label in sorted(set(baseline) | set(candidate)):
        coverage["targets"] += 1
        before, after = baseline.get(label), candidate.get(label)
        if before is None or after is None:
            side = "candidate" if before is None else "baseline"
            result["one_side"].append(
                {"target": label, "case": None, "reason": f"in the {side}'s run only"}
            )
            continue
        if before.status == bep.SKIPPED and after.status == bep.SKIPPED:
            result["skipped_both"].append({"target": label})
            continue
        if (before.status == bep.SKIPPED) != (after.status == bep.SKIPPED):
            item = {"target": label, "baseline": before.status, "candidate": after.status}
            result["skipped_one_side"].append(item)
            result["one_side"].append(
                {"target": label, "case": None, "reason": "SKIPPED on one side", "skip": item}
            )
            continue
        if not before.cases and not after.cases:
            result["one_side"].append(
                {"target": label, "case": None, "reason": "no test results on either side"}
            )
        compared = coverage["cases_compared"]
        known, known_infra = len(result["one_side"]), len(result["infra"])
        case_regressions = _compare_cases(
            label, before, after, thresholds, result, coverage, differ
        )
        coverage["targets_compared"] += coverage["cases_compared"] > compared
        # Cases that show why the candidate is red: regressions, and what infra stopped.
        shown = case_regressions + len(result["infra"]) - known_infra
        _compare_target(label, before, after, thresholds, result, shown)
        _unrun_in_red_targets(label, before, after, result, known)
        _infra_targets(label, before, after, result, known_infra)
    result["coverage"] = coverage
    return result


def _kind(case) -> str | None:
    """The expectation that accepts the case's outcome (record.Outcome.kind), or None."""
    return None if case is None else record.TABLE[case.outcome].kind


def as_declared(case) -> bool:
    """A declaration accepts the case's outcome (a declared fail or skip, not applicable)."""
    return _kind(case) in ("fail", "skip", "not applicable")


def regressed(old, new) -> bool:
    """The rule: a case that passed on the baseline and does not pass on the candidate, whatever
    explains it (a marker, a declaration, a skip), or that raised as accepted there (xfail) and
    now fails, is skipped or never ran."""
    if old.outcome == PASSED:
        return new.outcome != PASSED
    return old.outcome in GOOD and new.outcome in (FAILED,) + NOT_RUN


def _as_run(case):
    """The case as its body ran: one that passed against a stale expectation (which failed it)
    passed."""
    if case is None or case.stale is None:
        return case
    return dataclasses.replace(case, outcome=PASSED, declared=None)


def _failure(case) -> str | None:
    """A failed case's first failure line; None where it did not fail."""
    return case.message if case is not None and case.outcome == FAILED else None


def _stale_item(case, snap: TargetSnapshot, other=None) -> dict:
    """The stale expectation, the file that holds it (a declaration's), and whether the other
    side's run still needs it (`other_needs_it`: it failed or skipped as the same kind of
    expectation accepts)."""
    by = case.stale.get("by")
    if by == "marker":
        needs = other is not None and other.outcome == XFAIL
        return dict(case.stale, other_needs_it=needs)
    needs = _kind(other) in ("fail", "skip")
    return dict(case.stale, file=snap.expectations, other_needs_it=needs)


def _ran(case) -> bool:
    return case is not None and case.outcome not in NOT_RUN


def _not_run(case, side: str) -> str:
    """Why a case did not run on `side` (for the coverage list)."""
    if case is None:
        return f"absent on the {side}"
    if case.outcome == record.NEVER_RAN:
        return f"never ran on the {side}"
    return f"skipped on the {side}" + (f" ({case.message})" if case.message else "")


def _rated(change: dict, old, new) -> dict:
    """The change, marked for rates (tools/gate/rates.py) where both sides ran the case as a
    pass or a failure and one failed (a retry's failure counts): `first_run` holds each side's
    [failed runs, runs] (several with --repeat). Declared, xfail or skipped outcomes keep their
    own rules."""
    outcomes = (old.outcome, new.outcome)
    if all(o in (PASSED, FAILED) for o in outcomes) or (old.outcome, new.outcome) == (
        XFAIL,
        FAILED,
    ):
        if not (old.declared or new.declared):
            change["first_run"] = {
                "baseline": [old.failed_runs, old.runs],
                "candidate": [new.failed_runs, new.runs],
            }
    return change


def _compare_cases(label, before, after, thresholds, result, coverage, differ=None) -> int:
    regressions = 0
    after_red = after.status not in bep.GREEN
    before_empty = not before.cases and before.status not in bep.GREEN
    hung = _hung_case(after)
    for case_id in sorted(set(before.cases) | set(after.cases)):
        old, new = before.cases.get(case_id), after.cases.get(case_id)
        change = _change(label, case_id, old, new)
        # Compared as its body ran: a pass against a stale expectation is a pass (a fix where it
        # failed on the baseline), with the expectation named for its removal.
        for side, case, snap, other in (
            ("baseline", old, before, new),
            ("candidate", new, after, old),
        ):
            if case is not None and case.stale is not None:
                change[side] = "passed (stale expectation)"
                key = "baseline_stale" if side == "baseline" else "stale"
                change[key] = _stale_item(case, snap, other)
        old, new = _as_run(old), _as_run(new)
        verdict = infra.judge(_failure(old), _failure(new), differ)
        if verdict is not None and verdict.pop("infra"):
            result["infra"].append(dict(change, **verdict))
            continue
        if verdict is not None:
            change["infra_suspect"] = verdict
        side_refused = (
            ("candidate", after.infrastructure)
            if new is None
            else ("baseline", before.infrastructure)
        )
        if (old is None or new is None) and side_refused[1]:
            side, refused = side_refused
            result["infra"].append(
                dict(change, side=side, rule=f"no test ran on the {side}", **refused)
            )
            continue
        both_ran = _ran(old) and _ran(new)
        coverage["cases_compared"] += both_ran
        if new is not None and new.quarantine is not None and new.outcome in GOOD:
            regressions += _quarantined(change, old, new, result)
            continue
        if as_declared(new):
            if old is not None and old.outcome in GOOD and _kind(old) is None:
                # Declared for the candidate's release only: a change the declaration
                # accepts, still a change (the gate exits 1 unless --accept-declared).
                result["regressions"].append(dict(change, newly_declared=new.declared))
                regressions += 1
            else:
                result["declared"].append(dict(change, declared=new.declared))
            continue
        if new is None:
            if old.outcome in GOOD and after_red:
                result["regressions"].append(_absent(label, case_id, old, after))
                regressions += 1
                continue
            if after.cases or not after_red:
                result["vanished_cases"].append(change)
            if not as_declared(old):
                reason = "vanished on the candidate" if _ran(old) else _not_run(old, "baseline")
                if not _ran(old):
                    reason += ", absent on the candidate"
                elif not after.cases and after_red:
                    reason = f"absent on the candidate: {after.first_error or after.status}"
                result["one_side"].append(dict(change, reason=reason))
            continue
        if old is None:
            if before_empty:
                why = before.first_error or f"target {before.status}"
                result["one_side"].append(dict(change, reason=f"absent on the baseline: {why}"))
                continue
            result["new_cases"].append(change)
            if new.outcome == FAILED:
                result["regressions"].append(change)
                regressions += 1
            elif _ran(new):
                result["one_side"].append(dict(change, reason="new on the candidate"))
            else:
                result["one_side"].append(
                    dict(change, reason="new on the candidate, " + _not_run(new, "candidate"))
                )
            continue
        if regressed(old, new) and (new.outcome == record.NEVER_RAN or case_id == hung):
            result["regressions"].append(_absent(label, case_id, old, after, new))
            regressions += 1
        elif old.outcome == PASSED and new.outcome == XFAIL:
            # Only a marker explains it (an xfail whose condition holds on the candidate):
            # still a change, as a declaration for the candidate's release is.
            marker = f"xfail (a marker in the test): {new.message or 'no message'}"
            result["regressions"].append(dict(change, newly_declared=marker))
            regressions += 1
        elif regressed(old, new):
            result["regressions"].append(_rated(change, old, new))
            regressions += 1
        elif old.outcome in GOOD and new.failed_attempts:
            change["flaky_attempts"] = f"failed {new.failed_attempts} of {new.attempts} attempts"
            change["candidate"] = f"{new.outcome} on a retry"
            change.update(message=new.failed_message, log=new.failed_log)
            result["regressions"].append(_rated(change, old, new))
            regressions += 1
        elif old.outcome == new.outcome == FAILED:
            # Failed on both in one run each: a case that broke for good on the candidate may
            # have failed on the baseline by chance. Re-run on both (tools/gate/rates.py).
            result["broken_both"].append(_rated(change, old, new))
        else:
            if old.outcome != new.outcome:
                if old.outcome in RAISED and new.outcome == PASSED:
                    result["fixes"].append(_rated(change, old, new))
                else:
                    result["other_changes"].append(change)
            elif "stale" in change:  # passed on both sides; the candidate's expectation is stale
                result["other_changes"].append(change)
            elif old.outcome == XFAIL and old.message != new.message:
                change["baseline_message"] = old.message
                result["xfail_message_changes"].append(change)
            # A case that did not run on a side is not compared, whatever the targets' status.
            if not both_ran:
                if _ran(old) or _ran(new):
                    side = "baseline" if _ran(old) else "candidate"
                    reason = f"ran on the {side} only"
                elif as_declared(old):
                    reason = _not_run(new, "candidate") + ", a declared skip on the baseline"
                elif old.outcome == new.outcome == record.SKIPPED:
                    reason = f"skipped on both sides ({new.message or old.message})"
                elif old.outcome == new.outcome:
                    reason = "never ran on both sides"
                else:
                    reason = f"{_not_run(old, 'baseline')}, {_not_run(new, 'candidate')}"
                result["one_side"].append(dict(change, reason=reason))
        spread = _spread(old.times) + _spread(new.times)
        if _beyond(
            old.time_s, new.time_s, thresholds.duration_ratio, thresholds.duration_s, spread
        ):
            result["durations"].append(
                {
                    "target": label,
                    "case": case_id,
                    "baseline_s": old.time_s,
                    "candidate_s": new.time_s,
                }
            )
    return regressions


def _quarantined(change: dict, old, new, result: dict) -> int:
    """A candidate case a flaky entry quarantines, that passed or failed as it accepts: in
    `declared` with its runs judged, or a regression (1) where they exceed its rate, or where
    it failed and the baseline passed with no quarantine."""
    judged = quarantine.judged(new.quarantine)
    item = dict(change, declared=judged["summary"], quarantine=judged)
    newly = (
        judged["failures"] and old is not None and old.outcome == PASSED and old.quarantine is None
    )
    if newly:
        result["regressions"].append(dict(item, newly_declared=judged["summary"]))
    elif judged["exceeds"]:
        result["regressions"].append(dict(item, message=judged["summary"]))
    else:
        result["declared"].append(item)
    return 1 if newly or judged["exceeds"] else 0


def _unrun_in_red_targets(label, before, after, result, known: int) -> None:
    """What a red target did not run that no case shows: definitions that yield no case (the
    runner's record says so), or a red status no failing case explains."""
    lines = sorted(set(before.never_collected) | set(after.never_collected))
    for line in lines:
        sides = [
            s
            for s, snap in (("baseline", before), ("candidate", after))
            if line in snap.never_collected
        ]
        where = "both sides" if len(sides) == 2 else f"the {sides[0]}"
        result["one_side"].append(
            {"target": label, "case": None, "reason": f"never collected on {where}: {line}"}
        )
    if lines or any(item["target"] == label for item in result["one_side"][known:]):
        return
    for side, snap in (("baseline", before), ("candidate", after)):
        red = snap.status not in bep.GREEN and snap.status != bep.SKIPPED
        unrun = (FAILED, record.NEVER_RAN)
        explained = (
            any(c.outcome in unrun or c.stale for c in snap.cases.values())
            or snap.hung
            or snap.infrastructure
        )
        if red and snap.cases and not explained:
            why = snap.first_error or "see its log"
            result["one_side"].append(
                {
                    "target": label,
                    "case": None,
                    "reason": f"{snap.status} on the {side} with no failing case: {why}",
                }
            )


def _infra_targets(label, before, after, result, known: int) -> None:
    """A side that ran no test of the target for the host's sake, where no case showed it."""
    for side, snap in (("baseline", before), ("candidate", after)):
        shown = any(i["target"] == label and i["side"] == side for i in result["infra"][known:])
        if snap.infrastructure and not shown:
            result["infra"].append(
                {"target": label, "case": None, "side": side, "rule": f"no test ran on the {side}"}
                | snap.infrastructure
            )


def _compare_target(label, before, after, thresholds, result, shown_by_cases) -> None:
    # A candidate red for a stale expectation only, or for the host's sake, shows no regression.
    explained = after.infrastructure or any(c.stale for c in after.cases.values())
    if (
        before.status in bep.GREEN
        and after.status != "PASSED"
        and not shown_by_cases
        and not explained
    ):
        message = after.first_error or f"target {after.status}"
        if after.status == "FLAKY":
            message = "FLAKY: passed only on a retry; " + (after.first_error or "see the logs")
        result["regressions"].append(
            {
                "target": label,
                "case": None,
                "node_id": None,
                "baseline": before.status,
                "candidate": after.status,
                "message": message,
                "log": (after.attempt_logs or after.logs or [None])[0],
                "stack": after.stack,
            }
        )
    ran_both = before.status in bep.GREEN and after.status in bep.GREEN  # durations mean something
    spread = _spread(before.durations) + _spread(after.durations)
    if ran_both and _beyond(
        before.duration_s,
        after.duration_s,
        thresholds.duration_ratio,
        thresholds.duration_s,
        spread,
    ):
        result["durations"].append(
            {
                "target": label,
                "case": None,
                "baseline_s": before.duration_s,
                "candidate_s": after.duration_s,
            }
        )
    if before.peak_rss_mib is not None and after.peak_rss_mib is not None:
        if _beyond(
            before.peak_rss_mib, after.peak_rss_mib, thresholds.rss_ratio, thresholds.rss_mib
        ):
            result["rss"].append(
                {
                    "target": label,
                    "baseline_mib": before.peak_rss_mib,
                    "candidate_mib": after.peak_rss_mib,
                }
            )
