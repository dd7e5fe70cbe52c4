"""A bench with known answers for the gate's rates (tools/gate/rates.py): false reds, hidden
regressions and runs per case, beside Bazel's --flaky_test_attempts=3 and the gate's old rule.

    python3 bench/gate_rates.py [--cases 2000] [--seed 64] [--max-runs 5] [--confidence 0.99]

Each scenario is one case with a known failure rate per side (or an infrastructure fault); the
per-run outcomes are drawn with a seeded RNG, and the gate's own code decides: infra.judge for
the first run's failure texts, then rates.settle (the rounds of re-runs on both sides, one
"invocation" per side per round, and rates.decide), exactly as gate.py drives them. No torch,
no Bazel. Three rules over the same scenarios, in the same run:
  rates       the gate now: a case that did not pass on both sides in its first run is re-run
              on both until decided or --max-runs; red = regressed, not decided = exit 4
  attempts=3  Bazel's --flaky_test_attempts=3: a side's case passes if any of 3 attempts
              passes; red = passed on the baseline, failed on the candidate
  old gate    one run per side; passed -> failed is a regression re-run twice on the
              candidate, red whether consistent or flaky; a baseline failure hides the case
Prints a Markdown table (the committed results: bench/results/gate_rates_*.md).
"""

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.gate import infra, rates  # noqa: E402

FAIL = "AssertionError: broke"
NO_GPU = "RuntimeError: No CUDA GPUs are available"  # infra.py's table
# A CUDA build against a CPU build: infra.difference of the sides' fingerprints.
DIFFER = infra.difference({"cuda": None, "gpus": []}, {"cuda": "13.0", "gpus": []})
# (name, baseline failure rate, candidate failure rate, a true regression?, infra fault?)
SCENARIOS = [
    ("consistent regression", 0.0, 1.0, True, False),
    ("consistent regression, baseline 10 % flaky", 0.1, 1.0, True, False),
    *((f"{q:.0%} flaky on both sides", q, q, False, False) for q in (0.02, 0.1, 0.3, 0.5)),
    *((f"{q:.0%} flaky on the candidate only", 0.0, q, True, False) for q in (0.02, 0.1, 0.3, 0.5)),
    ("fix (fails on the baseline only)", 1.0, 0.0, False, False),
    ("broken on both sides", 1.0, 1.0, False, False),
    ("infrastructure fault on the candidate", 0.0, 1.0, False, True),
]


def draw(rng: random.Random, rate: float) -> bool:
    """One run: True where it failed."""
    return rng.random() < rate


def rule_rates(rng, cases, confidence, max_runs) -> list[tuple[str, int]]:
    """(outcome, runs both sides spent) per case: red, undecided (exit 4), infra or green."""
    first, out = {}, {}
    for n, (base, cand, is_infra) in enumerate(cases):
        b, c = draw(rng, base), draw(rng, cand)
        text = (NO_GPU if is_infra else FAIL) if c else None
        judged = infra.judge(FAIL if b else None, text, DIFFER if is_infra else None)
        if judged is not None and judged["infra"]:
            out[n] = ("infra", 2)
        elif not (b or c):
            out[n] = ("green", 2)
        else:
            first[n] = {"baseline": rates.Count(int(b), 1), "candidate": rates.Count(int(c), 1)}

    def rerun(side, asks):
        i = rates.SIDES.index(side)
        return {k: (sum(draw(rng, cases[k][i]) for _ in range(m)), m) for k, m in asks.items()}

    for n, d in rates.settle(first, rerun, confidence, max_runs).items():
        outcome = {rates.REGRESSED: "red", rates.NOT_DECIDED: "undecided"}.get(d["verdict"])
        out[n] = (outcome or "green", d["baseline"]["runs"] + d["candidate"]["runs"])
    return [out[n] for n in range(len(cases))]


def rule_attempts(rng, cases, attempts=3) -> list[tuple[str, int]]:
    """Bazel's --flaky_test_attempts: no notion of infrastructure, a consistent fault is red."""
    out = []
    for base, cand, _ in cases:
        spent, passed = 0, []
        for rate in (base, cand):
            for k in range(1, attempts + 1):
                if not draw(rng, rate):
                    spent, ok = spent + k, True
                    break
            else:
                spent, ok = spent + attempts, False
            passed.append(ok)
        out.append(("red" if passed[0] and not passed[1] else "green", spent))
    return out


def rule_old(rng, cases, confirmations=2) -> list[tuple[str, int]]:
    out = []
    for base, cand, is_infra in cases:
        b, c = draw(rng, base), draw(rng, cand)
        judged = infra.judge(
            FAIL if b else None,
            (NO_GPU if is_infra else FAIL) if c else None,
            DIFFER if is_infra else None,
        )
        if judged is not None and judged["infra"]:
            out.append(("infra", 2))
        elif c and not b:
            for _ in range(confirmations):
                draw(rng, cand)  # consistent or flaky: red either way
            out.append(("red", 2 + confirmations))
        else:
            out.append(("green", 2))
    return out


OUTCOMES = ("red", "undecided", "infra", "green")


def pct(k: int, n: int) -> str:
    return f"{100 * k / n:.2f} %"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000, help="scenarios per kind")
    parser.add_argument("--seed", type=int, default=64)
    parser.add_argument("--max-runs", type=int, default=rates.MAX_RUNS)
    parser.add_argument("--confidence", type=float, default=rates.CONFIDENCE)
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 unless the rates rule hides no consistent regression and its false-red "
        "rate is at most 1 %% (the self-test's smoke run)",
    )
    args = parser.parse_args(argv)
    start = time.monotonic()
    rules = {
        "rates": lambda rng, cases: rule_rates(rng, cases, args.confidence, args.max_runs),
        "attempts=3": rule_attempts,
        "old gate": rule_old,
    }
    rows, totals = [], {rule: {} for rule in rules}
    for name, base, cand, regression, is_infra in SCENARIOS:
        cases = [(base, cand, is_infra)] * args.cases
        # What the summary adds this kind to: (key, outcome counted).
        if not regression:
            keys = [("false red", "red"), ("not decided, no true regression", "undecided")]
        elif cand == 1.0:
            keys = [(f"hidden (green): {name}", "green")]
        else:
            keys = [("hidden (green): a flake on the candidate only", "green")]
        for rule, decide in rules.items():
            rng = random.Random(f"{args.seed}/{name}/{rule}")
            got = decide(rng, cases)
            count = {o: sum(1 for g, _ in got if g == o) for o in OUTCOMES}
            rows.append((name, rule, count, sum(s for _, s in got) / len(got)))
            for key, outcome in keys:
                k, n = totals[rule].get(key, (0, 0))
                totals[rule][key] = (k + count[outcome], n + len(got))
    n = args.cases
    print(
        f"`python3 bench/gate_rates.py --cases {n} --seed {args.seed} --max-runs "
        f"{args.max_runs} --confidence {args.confidence}`: {len(SCENARIOS)} kinds x {n} cases "
        f"per rule, {time.monotonic() - start:.1f} s.\n"
    )
    print(
        "| scenario | rule | red (exit 1) | not decided (exit 4) | infra (exit 4) | green "
        "| runs per case (both sides) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, rule, c, runs in rows:
        cells = " | ".join(pct(c[o], n) for o in OUTCOMES)
        print(f"| {name} | {rule} | {cells} | {runs:.2f} |")
    keys = list(totals["rates"])
    print("\n| rule | " + " | ".join(keys) + " |")
    print("| --- |" + " ---: |" * len(keys))
    for rule, t in totals.items():
        cells = " | ".join(f"{pct(*t[k])} ({t[k][0]} of {t[k][1]})" for k in keys)
        print(f"| {rule} | {cells} |")
    hidden, _ = totals["rates"]["hidden (green): consistent regression"]
    red, clean = totals["rates"]["false red"]
    if args.check and (hidden or red > 0.01 * clean):
        print(f"\nFAILED: {hidden} consistent regressions hidden, {red} of {clean} false reds")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
