"""The gate's report: Markdown for people (verdict and regressions first), the same data as JSON."""

import json
import os
import pathlib

TITLES = (
    ("fixes", "Fixes (failed, expected or declared failure → passed; never a regression)"),
    ("xfail_message_changes", "Expected failures that now fail differently (type or message)"),
    ("declared", "Declared outcomes and quarantines on the candidate (expectations files)"),
    ("other_changes", "Other outcome changes"),
    ("flaky_both", "Flaky on both sides (no significant difference; not a regression)"),
    ("broken_both", "Broken on both sides (failed every run on both; not a regression)"),
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
        "| side | what | torch | CUDA | Python | GPUs | bazel test s | output base |",
        "| --- | --- | --- | --- | --- | --- | ---: | --- |",
    ]
    for role in ("baseline", "candidate"):
        side = data["sides"][role]
        fp = side["fingerprint"]
        gpus = "; ".join(fp.get("gpus") or []) or "none"
        cuda = fp.get("cuda") or "none (CPU build)"
        rows.append(
            f"| {role} | {side['description']} | {fp.get('torch')} | {cuda} "
            f"| {fp.get('python')} | {gpus} | {side.get('wall_s', '')} | `{side['output_base']}` |"
        )
    return rows


HARDWARE_ROWS = (
    ("host", "host"),
    ("commit", "commit (git HEAD)"),
    ("tree", "tree as run (git write-tree, uncommitted files included)"),
    ("dirty", "uncommitted changes"),
    ("gpu_model", "GPU model"),
    ("gpu_count", "GPUs"),
    ("driver", "driver"),
    ("cuda_driver", "CUDA (driver)"),
    ("torch", "torch"),
    ("torch_cuda", "torch's CUDA"),
    ("nccl", "NCCL"),
    ("interconnect", "interconnect (nvidia-smi topo -m)"),
)


def _hardware_table(data: dict) -> list[str]:
    """Each side's hardware, where a side is a saved run or has GPUs (a pool change)."""
    hw = {role: data["sides"][role].get("hardware") or {} for role in ("baseline", "candidate")}
    if not any(h.get("gpu_count") or h.get("host") for h in hw.values()):
        return []
    rows = ["", "## Hardware", "", "| | baseline | candidate |", "| --- | --- | --- |"]
    for key, title in HARDWARE_ROWS:
        values = [hw[role].get(key) for role in ("baseline", "candidate")]
        mark = " **(differs)**" if values[0] != values[1] else ""
        shown = " | ".join("—" if v in (None, "") else str(v) for v in values)
        rows.append(f"| {title}{mark} | {shown} |")
    return rows


def _variants(data: dict) -> list[str]:
    """Which hardware variants were compared on both sides, and why the others were not."""
    variants = data.get("variants")
    if not variants:
        return []
    lines = [f"**Variants compared on both sides:** {', '.join(variants['compared']) or 'none'}."]
    by_reason = {}  # one line per reason, in the table's order
    for item in variants["not_compared"]:
        by_reason.setdefault(item["reason"], []).append(item)
    for reason, items in by_reason.items():
        names = ", ".join(f"`{item['variant']}`" for item in items)
        left = sum(len(item["targets"]) for item in items)
        targets = f"{left} target{'' if left == 1 else 's'}"
        out = f" ({targets} that ran on one side left out of the comparison)" if left else ""
        lines.append(f"- {names} not compared: {reason}{out}")
    return lines


def _tree_warnings(data: dict) -> list[str]:
    return (
        ["", "**Trees:**", *(f"- {w}" for w in data["tree_warnings"])]
        if data.get("tree_warnings")
        else []
    )


VERDICTS = {
    0: "complete, no regressions",
    1: "REGRESSED",
    4: "INCOMPLETE (no regression, but not everything ran on both sides, could be compared or "
    "was decided within the re-run budget)",
}


def verdict(data: dict) -> str:
    result = data["comparison"]
    cov = result["coverage"]
    return (
        f"{VERDICTS[data['exit_code']]} (exit {data['exit_code']}): "
        f"{len(result['regressions'])} regressions; compared on both sides: "
        f"{cov['targets_compared']} of {cov['targets']} targets, {cov['cases_compared']} cases; "
        f"{len(result['one_side'])} ran on one side only; "
        f"{len(result['infra'])} not compared for infrastructure; "
        f"{len(result.get('not_decided') or [])} not decided within the re-run budget"
    )


def _link(path, out) -> str:
    """A log under the report directory as a relative link; anything else as a path."""
    if not path:
        return "(none)"
    if out and pathlib.Path(path).is_relative_to(out):
        rel = os.path.relpath(path, out)
        return f"[{rel}]({rel})"
    return f"`{path}`"


def _builds(data: dict) -> str:
    def build(role):
        fp = data["sides"][role]["fingerprint"]
        cuda = f"CUDA {fp['cuda']} build" if fp.get("cuda") else "CPU build"
        return f"{role} torch {fp.get('torch')} ({cuda})"

    return f"{build('baseline')} vs {build('candidate')}"


def _stale_what(stale: dict) -> str:
    if stale.get("by") == "marker":
        return "xfail marker"
    return f"declared {stale.get('outcome')}"


def _infra_section(items: list) -> list[str]:
    """Cases and targets not compared for the host's or a build's sake, grouped by target,
    side and evidence (tools/gate/infra.py)."""
    if not items:
        return []
    lines = ["", "## Infrastructure (not compared: the host or a side's build, not torch)", ""]
    groups = {}
    for item in items:
        key = (item["target"], item["side"], item["cause"], item["evidence"], item["rule"])
        groups.setdefault(key, []).append(item)
    for (target, side, cause, evidence, rule), group in groups.items():
        cases = [i["case"] for i in group if i.get("case")]
        what = f"{len(cases)} case{'' if len(cases) == 1 else 's'}" if cases else "whole target"
        shown = ", ".join(f"`{c}`" for c in cases[:5]) + (" …" if len(cases) > 5 else "")
        lines.append(
            f"- `{target}` ({what}{': ' + shown if cases else ''}): {cause} on "
            f"{'both sides' if side == 'both' else 'the ' + side}, {group[0]['why']}; {rule}; "
            f"evidence: `{_short(evidence)}`"
        )
    return lines


def _rates_line(item: dict) -> list[str]:
    """The case's verdict on failure rates (tools/gate/rates.py): rates, intervals, p, runs."""
    decision = item.get("rates")
    if not isinstance(decision, dict) or not decision.get("line"):
        return []
    reruns = decision.get("reruns") or {}
    spent = ", ".join(f"{reruns[s]} on the {s}" for s in ("baseline", "candidate") if s in reruns)
    return [f"   - rates: {decision['line']}" + (f"; re-runs: {spent}" if spent else "")]


def markdown(data: dict, out=None) -> str:
    result = data["comparison"]
    regressions = result["regressions"]
    baseline, candidate = (data["sides"][role]["description"] for role in ("baseline", "candidate"))
    out_lines = [f"# Gate: {baseline} → {candidate}", ""]
    flaky = sum(
        1 for r in regressions if r.get("confirmation", {}).get("verdict", "").startswith("flaky")
    )
    declared = sum(1 for r in regressions if r.get("newly_declared"))
    counts = ", ".join(f"{len(result.get(key) or [])} {key.replace('_', ' ')}" for key, _ in TITLES)
    out_lines += [
        f"**{verdict(data)}.**",
        "",
        f"**{len(regressions)} regressions** "
        f"({len(regressions) - flaky - declared} not flaky, {flaky} flaky, {declared} newly "
        "declared for the candidate's release: --accept-declared accepts those); "
        f"{counts}; {len(result['skipped_one_side'])} targets SKIPPED on one side only, "
        f"{len(result['skipped_both'])} on both. Targets: {data['targets']}. "
        f"Gate wall time: {data['wall_s']:.0f} s.",
    ]
    out_lines += ["", *_variants(data), *_tree_warnings(data)]
    out_lines += ["", *_sides_table(data), *_hardware_table(data)]
    if data.get("package_changes"):
        out_lines += ["", "## Packages that differ", "", "| package | baseline | candidate |"]
        out_lines.append("| --- | --- | --- |")
        for row in data["package_changes"]:
            sides = f"{row['baseline'] or 'absent'} | {row['candidate'] or 'absent'}"
            out_lines.append(f"| {row['package']} | {sides} |")
    out_lines += ["", "## Regressions", ""]
    if not regressions:
        out_lines.append("None.")
    for i, item in enumerate(regressions, 1):
        confirmation = item.get("confirmation", {})
        verdict_text = confirmation.get("verdict", "not confirmed")
        if "failed_runs" in confirmation:
            verdict_text += (
                f" (failed {confirmation['failed_runs']} of {confirmation['runs']} runs)"
            )
        if item.get("flaky_attempts"):
            verdict_text = f"flaky: {item['flaky_attempts']}; re-runs: {verdict_text}"
        out_lines += [
            f"{i}. {_where(item)}: {_transition(item)}, **{verdict_text}**",
            f"   - first failure: `{_short(item['message'])}`",
        ]
        out_lines += _rates_line(item)
        if item.get("stack"):
            stack = "\n".join("     " + line for line in item["stack"].splitlines())
            out_lines += ["   - stack when it was stopped:", "", "     ```", stack, "     ```"]
        if item.get("infra_suspect"):
            suspect = item["infra_suspect"]
            out_lines.append(
                f"   - {suspect['rule']}: {suspect['why']} (`{_short(suspect['evidence'])}`)"
            )
        if item.get("bisect"):
            out_lines.append(f"   - culprit release: {item['bisect']['line']}")
        out_lines.append(f"   - log: {_link(item['log'], out)}")
        reruns = [_link(p, out) for p in item.get("rerun_logs", [])]
        if reruns:
            out_lines.append(f"   - re-run logs: {', '.join(reruns)}")
        if item.get("reproduce"):
            out_lines.append(f"   - reproduce: `{item['reproduce']}`")
    if result.get("not_decided"):
        out_lines += ["", "## Not decided within the re-run budget (exit 4)", ""]
        for item in result["not_decided"]:
            out_lines += [f"- {_where(item)}: {_transition(item)}", *_rates_line(item)]
    out_lines += _infra_section(result["infra"])
    if result["one_side"]:
        out_lines += ["", "## Ran on one side only (coverage is incomplete)", ""]
        for item in result["one_side"]:
            out_lines.append(f"- {_where(item)}: {item['reason']}")
    if result["skipped_one_side"]:
        out_lines += ["", "## Targets SKIPPED on one side only", ""]
        for item in result["skipped_one_side"]:
            reason = f": {item['reason']}" if item.get("reason") else ""
            sides = f"baseline {item['baseline']}, candidate {item['candidate']}"
            out_lines.append(f"- `{item['target']}`: {sides}{reason}")
    for key, title in TITLES:
        if result.get(key):
            out_lines += ["", f"## {title}", ""]
            for item in result[key]:
                extra = ""
                if key == "xfail_message_changes":
                    extra = f": `{_short(item['baseline_message'])}` → `{_short(item['message'])}`"
                elif key == "declared":
                    extra = f" ({_short(item['declared'])})"
                if item.get("stale"):
                    extra += f"; stale {_stale_what(item['stale'])}: {item['stale'].get('edit')}"
                out_lines.append(f"- {_where(item)}: {_transition(item)}{extra}")
                out_lines += _rates_line(item)
    if result["skipped_both"]:
        out_lines += ["", "## SKIPPED on both sides (this host cannot run them)", ""]
        out_lines.append(", ".join(f"`{item['target']}`" for item in result["skipped_both"]))
    informational = f"informational: {_builds(data)}, beyond each side's own run-to-run spread"
    if result["durations"]:
        out_lines += [
            "",
            f"## Durations beyond {data['thresholds']['durations']} ({informational})",
        ]
        out_lines += [
            "",
            "| target | case | baseline s | candidate s |",
            "| --- | --- | ---: | ---: |",
        ]
        for item in result["durations"]:
            case = item["case"] or "(target)"
            times = f"{item['baseline_s']:.1f} | {item['candidate_s']:.1f}"
            out_lines.append(f"| `{item['target']}` | {case} | {times} |")
    if result["rss"]:
        out_lines += [
            "",
            f"## Peak RSS beyond {data['thresholds']['rss']} (informational: {_builds(data)})",
        ]
        out_lines += ["", "| target | baseline MiB | candidate MiB |", "| --- | ---: | ---: |"]
        for item in result["rss"]:
            out_lines.append(
                f"| `{item['target']}` | {item['baseline_mib']} | {item['candidate_mib']} |"
            )
    out_lines += [
        "",
        "## Targets",
        "",
        "| target | baseline | candidate | peak RSS MiB (b / c) |",
        "| --- | --- | --- | --- |",
    ]
    for label, row in data["target_status"].items():
        rss = f"{row['baseline_rss']} / {row['candidate_rss']}"
        out_lines.append(f"| `{label}` | {row['baseline']} | {row['candidate']} | {rss} |")
    return "\n".join(out_lines) + "\n"


def dump_json(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"
