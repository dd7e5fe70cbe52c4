"""The gate's report: Markdown for people (regressions first), the same data as JSON."""

import json

TITLES = (
    ("fixes", "Fixes (failed → passed)"),
    ("xfail_changes", "Expected failures changed (xfail ↔ xpass)"),
    ("other_changes", "Other outcome changes"),
    ("new_cases", "New test cases (candidate only)"),
    ("vanished_cases", "Vanished test cases (baseline only)"),
)


def _short(message: str, limit: int = 200) -> str:
    message = (message or "").replace("`", "'")
    return message if len(message) <= limit else message[:limit] + " …"


def _transition(item: dict) -> str:
    return f"{item['baseline'] or 'absent'} → {item['candidate'] or 'absent'}"


def _where(item: dict) -> str:
    return (
        f"`{item['target']}` `{item['case']}`"
        if item.get("case")
        else f"`{item['target']}` (whole target)"
    )


def _sides_table(data: dict) -> list[str]:
    rows = [
        "| side | what | torch | CUDA | Python | GPUs | output base |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for role in ("baseline", "candidate"):
        side = data["sides"][role]
        fp = side["fingerprint"]
        gpus = "; ".join(fp.get("gpus") or []) or "none"
        cuda = fp.get("cuda") or "none (CPU build)"
        rows.append(
            f"| {role} | {side['description']} | {fp.get('torch')} | {cuda} "
            f"| {fp.get('python')} | {gpus} | `{side['output_base']}` |"
        )
    return rows


def markdown(data: dict) -> str:
    result = data["comparison"]
    regressions = result["regressions"]
    baseline, candidate = (data["sides"][role]["description"] for role in ("baseline", "candidate"))
    out = [f"# Upgrade gate: {baseline} → {candidate}", ""]
    flaky = sum(1 for r in regressions if r.get("confirmation", {}).get("verdict") == "flaky")
    counts = ", ".join(f"{len(result[key])} {key.replace('_', ' ')}" for key, _ in TITLES)
    out.append(
        f"**{len(regressions)} regressions** "
        f"({len(regressions) - flaky} consistent, {flaky} flaky); "
        f"{counts}; {len(result['skipped_one_side'])} targets SKIPPED on one side only. "
        f"Targets: {data['targets']}."
    )
    out += ["", *_sides_table(data), "", "## Regressions", ""]
    if not regressions:
        out.append("None.")
    for i, item in enumerate(regressions, 1):
        confirmation = item.get("confirmation", {})
        verdict = confirmation.get("verdict", "not confirmed")
        if "failed_runs" in confirmation:
            verdict += f" (failed {confirmation['failed_runs']} of {confirmation['runs']} runs)"
        out += [
            f"{i}. {_where(item)}: {_transition(item)}, **{verdict}**",
            f"   - first failure: `{_short(item['message'])}`",
            f"   - log: `{item['log']}`",
        ]
    if result["skipped_one_side"]:
        out += ["", "## Targets SKIPPED on one side only", ""]
        for item in result["skipped_one_side"]:
            reason = f": {item['reason']}" if item.get("reason") else ""
            sides = f"baseline {item['baseline']}, candidate {item['candidate']}"
            out.append(f"- `{item['target']}`: {sides}{reason}")
    for key, title in TITLES:
        if result[key]:
            out += ["", f"## {title}", ""]
            for item in result[key]:
                out.append(f"- {_where(item)}: {_transition(item)}")
    if result["durations"]:
        out += ["", f"## Durations beyond {data['thresholds']['durations']}", ""]
        out += ["| target | case | baseline s | candidate s |", "| --- | --- | ---: | ---: |"]
        for item in result["durations"]:
            case = item["case"] or "(target)"
            times = f"{item['baseline_s']:.1f} | {item['candidate_s']:.1f}"
            out.append(f"| `{item['target']}` | {case} | {times} |")
    if result["rss"]:
        out += ["", f"## Peak RSS beyond {data['thresholds']['rss']}", ""]
        out += ["| target | baseline MiB | candidate MiB |", "| --- | ---: | ---: |"]
        for item in result["rss"]:
            out.append(f"| `{item['target']}` | {item['baseline_mib']} | {item['candidate_mib']} |")
    out += [
        "",
        "## Targets",
        "",
        "| target | baseline | candidate | peak RSS MiB (b / c) |",
        "| --- | --- | --- | --- |",
    ]
    for label, row in data["target_status"].items():
        rss = f"{row['baseline_rss']} / {row['candidate_rss']}"
        out.append(f"| `{label}` | {row['baseline']} | {row['candidate']} | {rss} |")
    return "\n".join(out) + "\n"


def dump_json(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"
