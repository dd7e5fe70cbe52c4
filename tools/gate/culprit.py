"""--bisect: the culprit release, the first torch release where a regressed case changed.

    gate.py --candidate torch==2.15.0 --bisect //dynamo_tests:test_aot_autograd

For each regressed case with a node id, the case runs alone (TORCH_TEST_NODE_IDS) on every
torch release the package index serves strictly between the baseline's release and the
candidate's (`pip index versions torch`, PIP_CONFIG_FILE=/dev/null as tools/gate/candidate.py
installs them), each release a candidate venv built as `--candidate torch==X` builds it and
cached the same way; the two ends are the gate's own runs. A regression then reads

    first changed in 2.14.0 (2.13.0 passed, 2.14.0 failed, 2.14.1 failed, 2.15.0 failed)

and "not monotonic" where a later release returns to the baseline's outcome. The cases of one
target run in one `bazel test` per release. Only regressions the gate's re-runs confirmed
consistent are bisected: one run per release cannot place a flaky case, whose line then says so.
"""

import re
import subprocess

from tools.gate import candidate

VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def _key(version: str) -> tuple:
    match = VERSION.match(version or "")
    return tuple(int(x) for x in match.groups()) if match else ()


def available(python: str = "python3") -> list[str]:
    """torch releases on the index, as pip sees them past this machine's configuration."""
    done = subprocess.run(
        [python, "-m", "pip", "index", "versions", "torch"],
        env=candidate._pip_env(),
        capture_output=True,
        text=True,
    )
    match = re.search(r"Available versions: (.+)", done.stdout)
    return [v.strip() for v in match.group(1).split(",")] if match else []


def between(low: str, high: str, versions: list[str]) -> list[str]:
    """Plain releases (no +local build) strictly between two versions, oldest first."""
    lo, hi = _key(low), _key(high)
    inside = {v for v in versions if "+" not in v and lo < _key(v) < hi}
    return sorted(inside, key=_key)


def _short(version: str) -> str:
    return VERSION.match(version).group(0) if VERSION.match(version or "") else str(version)


def first_changed(steps: list[tuple[str, str]]) -> int | None:
    """The index of the first release whose outcome differs from the baseline's, or None."""
    return next((i for i, (_, o) in enumerate(steps) if o != steps[0][1]), None)


def verdict(steps: list[tuple[str, str]]) -> str:
    """The line for [(release, outcome), ...] from the baseline's release to the candidate's."""
    evidence = ", ".join(f"{_short(r)} {o}" for r, o in steps)
    base = steps[0][1]
    changed = first_changed(steps)
    if changed is None:
        return f"unchanged at every release ({evidence})"
    line = f"first changed in {_short(steps[changed][0])} ({evidence})"
    back = [r for r, o in steps[changed + 1 :] if o == base]
    if back:
        line += f"; not monotonic: {', '.join(map(_short, back))} {base} again"
    return line


def bisect(regressions: list, baseline_torch: str, candidate_torch: str, run_case) -> None:
    """Adds item["bisect"] to each regression with a node id.

    run_case(release, label, node_ids) -> {node_id: outcome} runs those cases alone on a venv
    of torch==release (the gate's Bazel); a case it did not report is "did not run".
    """
    items = []
    for item in regressions:
        if not item.get("node_id") or item.get("newly_declared"):
            continue
        confirmed = item.get("confirmation", {}).get("verdict", "not confirmed")
        if confirmed == "consistent":
            items.append(item)
        else:  # one run per release would name a release by chance
            item["bisect"] = {"line": f"not bisected: {confirmed}", "steps": []}
    if not items:
        return
    releases = between(baseline_torch, candidate_torch, available())
    by_target = {}
    for item in items:
        by_target.setdefault(item["target"], []).append(item)
    outcomes = {}  # (release, node id) -> outcome
    for release in releases:
        for label, group in sorted(by_target.items()):
            ids = sorted({i["node_id"] for i in group})
            got = run_case(release, label, ids)
            for node_id in ids:
                outcomes[(release, node_id)] = got.get(node_id, "did not run")
    for item in items:
        candidate_outcome = item["candidate"] or "absent"
        steps = [(baseline_torch, item["baseline"] or "absent")]
        steps += [(r, outcomes[(r, item["node_id"])]) for r in releases]
        steps.append((candidate_torch, candidate_outcome))
        item["bisect"] = {"line": verdict(steps), "steps": steps}
