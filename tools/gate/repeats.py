"""--repeat N judged whole: every run of every shard, not the worst outcome of each case.

    found = repeats.regressions(targets, baseline, seen)   # targets: bep.Targets of the repeat

A repeat is a (flaky) regression where, in any attempt of any run:
  - a case that passed (or xfailed) on the baseline did not pass: failed (an xpass too),
    skipped (an undeclared skip), never ran, or (passed on the baseline) an xfail; or was absent
    from a run that was not PASSED (a crash or abort stopped it before the case ran);
  - the run's status is not PASSED and no case shows why (e.g. SIGABRT after the last case),
    where the baseline target was green.
Each names the run, its log and its first failure line; the gate adds the reproduce command.
"""

from tools.gate import compare
from tools.results import bep, facts, junit


def _read(path) -> str:
    return path.read_text(errors="replace") if path and path.is_file() else ""


def _where(target: bep.Target, attempt: bep.Attempt) -> str:
    where = f"repeat run {attempt.run} of {target.run_count}"
    if target.shard_count > 1:
        where += f", shard {attempt.shard}"
    if attempt.attempt > 1:
        where += f", attempt {attempt.attempt}"
    return where


def _item(label, case_id, node_id, before, candidate, message, log) -> dict:
    return {
        "target": label,
        "case": case_id,
        "node_id": node_id,
        "baseline": before,
        "candidate": candidate,
        "message": message,
        "log": str(log) if log else None,
        "repeat": True,
        "confirmation": {"verdict": "flaky (passed in the gate's run, not in a --repeat run)"},
    }


def regressions(targets: dict, baseline: dict, seen: set) -> list[dict]:
    """Regressions of the repeat runs of `targets` against the baseline's TargetSnapshots;
    `seen` holds (label, case id) already reported (updated)."""
    found = []
    for label, target in targets.items():
        before = baseline.get(label)
        if before is None or before.status == bep.SKIPPED:
            continue
        read = [
            (a, junit.cases(a.xml) if a.xml and a.xml.is_file() else []) for a in target.attempts
        ]
        shard_cases = {}
        for attempt, cases in read:
            shard_cases.setdefault(attempt.shard, set()).update(c.id for c in cases)
        for attempt, cases in read:
            where = _where(target, attempt)
            got = {c.id: c for c in cases}
            shown = False  # a case tells why this run is not PASSED
            for c in cases:
                old, case = before.cases.get(c.id), c.case
                if old is None:
                    continue
                # An xfail leaves the run PASSED; after a pass on the baseline it is a change.
                xfail_after_pass = (case.outcome, old.outcome) == (compare.XFAIL, compare.PASSED)
                if case.outcome in compare.GOOD and not xfail_after_pass:
                    continue
                shown = shown or not xfail_after_pass
                if compare.as_declared(case) or old.outcome not in compare.GOOD:
                    continue  # accepted, or failing on the baseline too
                if (label, c.id) not in seen:
                    seen.add((label, c.id))
                    message = case.message or f"{case.outcome} (no message)"
                    found.append(
                        _item(
                            label,
                            c.id,
                            c.node_id,
                            old.outcome,
                            f"{case.outcome} in {where}",
                            message,
                            attempt.log,
                        )
                    )
            if attempt.status == "PASSED":
                continue
            why = facts.first_error(facts.of(attempt), _read(attempt.log)) or attempt.status
            for case_id in sorted(shard_cases[attempt.shard] - set(got)):
                old = before.cases.get(case_id)
                if old is None or old.outcome not in compare.GOOD:
                    continue
                shown = True
                if (label, case_id) not in seen:
                    seen.add((label, case_id))
                    found.append(
                        _item(
                            label,
                            case_id,
                            old.node_id,
                            old.outcome,
                            f"absent in {where} ({attempt.status})",
                            why,
                            attempt.log,
                        )
                    )
            if not shown and before.status in bep.GREEN and (label, where) not in seen:
                seen.add((label, where))
                found.append(
                    _item(
                        label,
                        None,
                        None,
                        before.status,
                        f"{attempt.status} in {where}",
                        why,
                        attempt.log,
                    )
                )
    return found
