"""A quarantined case (an expectations entry `outcome = "flaky"`) over the runs a side made.

The runner judges one run: a failure the entry's match accepts is green (`quarantined`), until
the entry expires (tools/runner/session/expectations.py). The rate is judged here, where a
side's runs of a case are known (--runs_per_test, each shard's record): with k failures in n
runs, a one-sided binomial test against the entry's `rate` at CONFIDENCE (P(X >= k) under the
rate below 1 - CONFIDENCE: it fails more often than its entry says, a regression); with no
failure in n runs, where the upper bound 1 - (1 - CONFIDENCE) ** (1 / n) on the rate is below
the entry's, the gate proposes to remove it.

    q = quarantine.judged({"issue": ..., "until": ..., "rate": 0.05, "runs": 3, "failures": 1})
    q["exceeds"], q["remove"], q["summary"]
"""

import datetime
import math
import re

CONFIDENCE = 0.99
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def tail(k: int, n: int, rate: float) -> float:
    """P(X >= k) for X ~ Binomial(n, rate): how likely k or more failures in n runs are at the
    stated rate."""
    return sum(math.comb(n, i) * rate**i * (1 - rate) ** (n - i) for i in range(k, n + 1))


def upper_bound(n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided upper bound on the failure rate after n clean runs."""
    return 1 - (1 - confidence) ** (1 / n)


def judged(q: dict, today: datetime.date | None = None) -> dict:
    """The record's `quarantine` (tools/results/record.py) with `runs` and `failures` counted
    over a side's runs, and what they say: `p_value`, `exceeds` (its rate), `remove` (the
    proposal to end it) and a `summary` line for the report."""
    k, n, rate = q["failures"], q["runs"], q["rate"]
    p_value = tail(k, n, rate)
    exceeds = k > 0 and p_value < 1 - CONFIDENCE
    remove = None
    if k == 0 and n and upper_bound(n) < rate:
        remove = f"{n} clean runs bound the rate below {rate}: remove the entry"
    line = f"flaky (issue {q['issue']}, until {q['until']}, rate {rate}): failed {k} of {n} runs"
    if exceeds:
        line += f", above its rate (P = {p_value:.2g} < {1 - CONFIDENCE:.2g})"
    until = q["until"]
    if _DATE.fullmatch(until) and (today or datetime.date.today()) > datetime.date.fromisoformat(
        until
    ):
        line += f"; expired on {until}: fix the test or renew the entry"
    if remove:
        line += f"; {remove}"
    return dict(q, p_value=p_value, exceeds=exceeds, remove=remove, summary=line)
