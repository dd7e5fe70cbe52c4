"""Rates, not single runs: a case that did not pass on both sides is re-run on both and decided
by its failure rates, with a stated error.

    verdict = rates.decide(rates.Count(0, 5), rates.Count(5, 5))   # baseline, candidate
    rates.settle(cases, rerun)   # rounds of re-runs until each case is decided or out of budget

Each side of a case is a Count (runs, failed). The test is Fisher's exact one-sided test on the
2x2 table (failed / passed x baseline / candidate) at alpha = 1 - confidence: `regressed` when
the candidate fails significantly more often, `fixed` when significantly less. A side that
fails every run and passes none against one that passes every run needs n runs each where
1/C(2n, n) < alpha: 5 at confidence 0.99 (p = 1/252). Each side's rate is reported with its
Wilson score interval at the same confidence.

Out of budget (`max_runs` per side, or no significance reachable within it) a case is
`broken on both` (every run failed on both sides), `not decided` (the candidate failed more
often, not significantly: the runs per side that would settle it at the observed rates are
named; the gate exits 4), or `flaky on both` (fails sometimes, the candidate no more often
than the baseline: no regression). A side that cannot be re-run (a saved run, `results:DIR`)
keeps its recorded runs; the test cannot reach the confidence with one run, so a candidate that
failed every one of its runs against a baseline that passed every one of its runs is
`regressed` all the same, and a candidate that failed some is `not decided`, each noting the
side not re-runnable: never green by lack of runs.

Standard library only: the gate and bench/gate_rates.py drive the same code.
"""

import dataclasses
import math
import statistics

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = [
    "CONFIDENCE",
    "Count",
    "MAX_RUNS",
    "NOT_DECIDED",
    "REGRESSED",
    "SIDES",
    "decide",
    "settle",
]

CONFIDENCE = 0.99
MAX_RUNS = 5
SIDES = ("baseline", "candidate")
REGRESSED, FIXED = "regressed", "fixed"
FLAKY_BOTH, BROKEN_BOTH, NOT_DECIDED = "flaky on both", "broken on both", "not decided"
# Where each verdict is listed in the comparison (compare.py's keys).
LISTS = {
    REGRESSED: "regressions",
    FIXED: "fixes",
    FLAKY_BOTH: "flaky_both",
    BROKEN_BOTH: "broken_both",
    NOT_DECIDED: "not_decided",
}
# The most runs per side "not decided" looks ahead for at the observed rates.
LOOK_AHEAD = 10_000


@dataclasses.dataclass(frozen=True)
class Count:
    failed: int
    runs: int

    @property
    def rate(self) -> float:
        return self.failed / self.runs if self.runs else 0.0


def _hypergeom(k: int, n_fail: int, n_cand: int, n_all: int) -> float:
    """P(the candidate holds k of the n_fail failures) under no difference between the sides."""
    return math.comb(n_cand, k) * math.comb(n_all - n_cand, n_fail - k) / math.comb(n_all, n_fail)


def fisher(base: Count, cand: Count) -> tuple[float, float]:
    """Fisher's exact one-sided p-values: (candidate fails more often, candidate fails less)."""
    n_fail, n_all = base.failed + cand.failed, base.runs + cand.runs
    low, high = max(0, n_fail - base.runs), min(n_fail, cand.runs)
    more = sum(_hypergeom(k, n_fail, cand.runs, n_all) for k in range(cand.failed, high + 1))
    less = sum(_hypergeom(k, n_fail, cand.runs, n_all) for k in range(low, cand.failed + 1))
    return min(more, 1.0), min(less, 1.0)


def wilson(count: Count, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of a failure rate, two-sided at `confidence`."""
    if not count.runs:
        return 0.0, 1.0
    z = statistics.NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    n, p = count.runs, count.rate
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def runs_to_settle(base: Count, cand: Count, confidence: float = CONFIDENCE) -> int | None:
    """Runs per side at which the observed rates, kept, would make the candidate's higher rate
    significant; None where it is not higher (or beyond LOOK_AHEAD)."""
    if cand.rate <= base.rate:
        return None
    alpha = 1 - confidence
    start = max(base.runs, cand.runs, 1)
    n = start
    while n <= LOOK_AHEAD:
        b, c = Count(round(base.rate * n), n), Count(round(cand.rate * n), n)
        if fisher(b, c)[0] < alpha:
            return n
        n = n + 1 if n < 64 else int(n * 1.1)
    return None


def first_round(confidence: float = CONFIDENCE, max_runs: int = MAX_RUNS) -> int:
    """Runs per side at which a side failing every run against one passing every run is
    significant (1/C(2n, n) < alpha): the first round brings every case there at once."""
    n = 1
    while 1 / math.comb(2 * n, n) >= 1 - confidence and n < max_runs:
        n += 1
    return min(n, max_runs)


def decide(
    base: Count,
    cand: Count,
    confidence: float = CONFIDENCE,
    max_runs: int = MAX_RUNS,
    fixed: dict | None = None,
) -> dict:
    """The verdict on a case's counts, or {"verdict": None, "runs": {side: n}}: run each side
    up to n first. `fixed`: {side: why it cannot be re-run} (a saved run)."""
    alpha = 1 - confidence
    more, less = fisher(base, cand)
    counts = dict(zip(SIDES, (base, cand), strict=True))
    fixed = fixed or {}
    out = {
        "p_regressed": more,
        "p_fixed": less,
        "confidence": confidence,
        "test": "Fisher's exact one-sided",
        "interval": "Wilson score",
    }
    for side, count in counts.items():
        low, high = wilson(count, confidence)
        out[side] = {"failed": count.failed, "runs": count.runs, "low": low, "high": high}
    if more < alpha:
        return dict(out, verdict=REGRESSED)
    if less < alpha:
        return dict(out, verdict=FIXED)
    # Every side runs its whole budget unless decided: a side that failed its one run by
    # chance must not hide a candidate that broke for good.
    budget = {s: counts[s].runs if s in fixed else max_runs for s in SIDES}
    if any(counts[s].runs < budget[s] for s in SIDES):
        step = max(first_round(confidence, max_runs), 2 * max(base.runs, cand.runs))
        wanted = {s: min(budget[s], max(counts[s].runs, step)) for s in SIDES}
        return dict(out, verdict=None, runs=wanted)
    saved = [s for s in SIDES if s in fixed]
    if saved:
        out["note"] = "; ".join(f"{s} not re-runnable ({fixed[s]})" for s in saved) + (
            ": its recorded runs stand, not at the stated confidence"
        )
    if base.failed == base.runs and cand.failed == cand.runs:
        return dict(out, verdict=BROKEN_BOTH)
    if saved and cand.failed == cand.runs and base.failed == 0:
        return dict(out, verdict=REGRESSED)
    if saved and base.failed == base.runs and cand.failed == 0:
        return dict(out, verdict=FIXED)
    if cand.rate > base.rate:
        if saved:
            why = " and ".join(f"the {s}'s ({fixed[s]})" for s in saved)
            return dict(out, verdict=NOT_DECIDED, settle=f"runs of {why} live")
        n = runs_to_settle(base, cand, confidence)
        settle = (
            f"about {n} runs per side ({n - base.runs} more on the baseline, "
            f"{n - cand.runs} more on the candidate) at the observed rates: --max-runs {n}"
            if n
            else f"more than {LOOK_AHEAD} runs per side at the observed rates"
        )
        return dict(out, verdict=NOT_DECIDED, settle=settle)
    return dict(out, verdict=FLAKY_BOTH)


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def line(decision: dict) -> str:
    """The verdict in words: each side's rate and interval, the test's p, the runs spent."""
    conf = decision["confidence"]
    sides = "; ".join(
        f"{s} failed {d['failed']} of {d['runs']} ({_pct(Count(d['failed'], d['runs']).rate)}, "
        f"{_pct(conf)} {decision['interval']} interval {_pct(d['low'])}–{_pct(d['high'])})"
        for s in SIDES
        for d in [decision[s]]
    )
    verdict = decision["verdict"]
    p = decision["p_fixed"] if verdict == FIXED else decision["p_regressed"]
    text = f"{verdict}: {sides}; {decision['test']} p = {p:.3g} (alpha {1 - conf:.3g})"
    if decision.get("settle"):
        text += f"; would settle with {decision['settle']}"
    if decision.get("note"):
        text += f"; {decision['note']}"
    return text


def settle(cases: dict, rerun, confidence=CONFIDENCE, max_runs=MAX_RUNS, fixed=None) -> dict:
    """Decides every case: {key: {"baseline": Count, "candidate": Count}} of first runs.

    rerun(side, {key: runs to add}) -> {key: (failed, ran)} runs those cases on that side (one
    round: the gate's one Bazel invocation per side) and counts what each did; a case that did
    not run again on a side is not re-run there any more. `fixed`: {side: why it cannot be
    re-run}. Returns {key: decision}, each with "reruns" {side: runs added}.
    """
    counts = {key: dict(sides) for key, sides in cases.items()}
    stuck = {key: dict(fixed or {}) for key in cases}
    added = {key: dict.fromkeys(SIDES, 0) for key in cases}
    decided = {}
    while len(decided) < len(cases):
        asks = {side: {} for side in SIDES}
        for key in cases:
            if key in decided:
                continue
            c = counts[key]
            d = decide(c["baseline"], c["candidate"], confidence, max_runs, stuck[key])
            if d["verdict"] is not None:
                decided[key] = dict(d, reruns=added[key])
                continue
            for side in SIDES:
                if d["runs"][side] > c[side].runs:
                    asks[side][key] = d["runs"][side] - c[side].runs
        for side in SIDES:
            if not asks[side]:
                continue
            got = rerun(side, asks[side])
            for key in asks[side]:
                failed, ran = got.get(key, (0, 0))
                old = counts[key][side]
                counts[key][side] = Count(old.failed + failed, old.runs + ran)
                added[key][side] += ran
                if ran == 0:
                    stuck[key][side] = "the case did not run again there"
    return decided
