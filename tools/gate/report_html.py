"""The gate's report as one page (report.html), from report.json's data alone.

One self-contained file: inline CSS and a few lines of inline script (a filter for the grid),
no network, no fonts. In order: the verdict, its exit code's meaning and what was compared;
the regressions, each with its first failure, logs and the command that reproduces it; a
case × variant grid of every case a category lists (baseline → candidate in each cell, the
other cases counted per target); the culprit releases `--bisect` found, on a timeline; fixes,
infrastructure failures and declared outcomes (quarantines among them); then report.md's
lists. A category report.json lacks (an older gate's) has no section; an empty one says none.
Every value is HTML-escaped: case ids, messages and paths are whatever the tests made them.
"""

import collections
import html
import html.parser
import json

from tools.gate import compare, culprit, report
from tools.hardware import table

# The grid's categories, most telling first: a case several lists name shows the first.
# (report.json key, word in the grid, CSS class)
GRID_CATEGORIES = (
    ("regressions", "regression", "reg"),
    ("infra", "infrastructure", "infra"),
    ("one_side", "one side only", "one"),
    ("not_decided", "not decided", "one"),
    ("fixes", "fix", "fix"),
    ("declared", "declared", "decl"),
    ("xfail_message_changes", "xfail message", "chg"),
    ("other_changes", "changed", "chg"),
    ("new_cases", "new", "chg"),
    ("vanished_cases", "vanished", "chg"),
    ("flaky_both", "flaky on both", "chg"),
    ("broken_both", "broken on both", "chg"),
)
WORDS = {key: (word, cls) for key, word, cls in GRID_CATEGORIES}
# Listed after the sections the page leads with (report.md's titles).
OTHER_LISTS = ("xfail_message_changes", "other_changes", "new_cases")
OTHER_LISTS += ("vanished_cases", "not_decided", "flaky_both", "broken_both")
# Regression fields the page shows by name; any other scalar field is listed as it is.
SHOWN_FIELDS = {
    "target",
    "case",
    "node_id",
    "baseline",
    "candidate",
    "message",
    "log",
    "stack",
    "confirmation",
    "bisect",
    "rerun_logs",
    "reproduce",
    "newly_declared",
    "flaky_attempts",
    "infra_suspect",
    "stale",
    "rates",
    "first_run",
}
GREEN = ("PASSED", "FLAKY")  # statuses whose target's cases all ended well (FLAKY: on a retry)
# Regressions shown whole; the rest one row each (the page stays a few MB at 5,000 cases).
DETAILED = 100
GROUP_NAMED = 20  # a culprit row names this many regressions by case, more by number

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1f24;
background:#f6f7f9}
main{max-width:1360px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:20px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ccd;
padding-bottom:4px}h3{font-size:14px;margin:12px 0 4px}
code,pre{font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",monospace}
pre{background:#fff;border:1px solid #dde;padding:6px 8px;white-space:pre-wrap;
word-break:break-word;margin:4px 0;max-height:18em;overflow:auto}
table{border-collapse:collapse;background:#fff;margin:6px 0}
th,td{border:1px solid #d5d8de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.num,th.num{text-align:right}
.banner{padding:12px 16px;border-radius:6px;border:2px solid;margin:8px 0}
.exit-0{background:#e3f6e5;border-color:#2e8b3a}.exit-1{background:#fde4e4;border-color:#c62828}
.exit-4{background:#fff4d6;border-color:#c99400}
.verdict{font-size:17px;font-weight:700}
.exits{margin:6px 0 0;padding-left:20px}.exits .this{font-weight:700}
.counts td{min-width:5em}
.reg-item{background:#fff;border:1px solid #d5d8de;border-left:5px solid #c62828;
padding:8px 12px;margin:10px 0;border-radius:4px}
.reg-item dl{display:grid;grid-template-columns:9em 1fr;gap:2px 10px;margin:6px 0 0}
.reg-item dt{color:#555}.reg-item dd{margin:0;min-width:0}
.repro{user-select:all;display:block;background:#f1f3f6;padding:4px 6px;word-break:break-all}
.grid td.cell{white-space:nowrap;font-size:12.5px}
.grid td.why{white-space:normal;min-width:14em;max-width:26em}
.grid td.case{min-width:18em;max-width:30em}.grid td.case code{overflow-wrap:anywhere}
.reg{background:#fbd3d3}.fix{background:#d3f0d6}.infra{background:#e6dcf5}
.one{background:#fff0c2}.decl,.quar{background:#d8e6fb}.chg{background:#eceef1}
.ok{background:#eef8ef}.bad{background:#fbd3d3}.fail{background:#f6e0e0}
.skip{background:#f1f1f1;color:#666}.absent{background:#fff;color:#888}
.badge{display:inline-block;padding:0 6px;border-radius:3px;font-size:12px;white-space:nowrap}
.legend span{margin-right:6px}
.timeline td{text-align:center;white-space:nowrap;font-size:12.5px}
.timeline td:first-child{text-align:left}
.timeline td.culprit{outline:3px solid #1b1f24;outline-offset:-3px;font-weight:700}
.note{color:#555}.none{color:#555;font-style:italic}
td code{overflow-wrap:break-word}td a code{overflow-wrap:anywhere}
.grid td:nth-child(2),#grid-targets td:first-child{white-space:nowrap}
input[type=search]{font:inherit;padding:3px 6px;width:28em}
"""

# The grid's filter: rows whose text holds what is typed; the count shown follows.
SCRIPT = """
(function(){var f=document.getElementById('grid-filter');
var rows=Array.prototype.slice.call(document.querySelectorAll('#grid-cases tbody tr'));
var n=document.getElementById('grid-shown');
function apply(){var q=f.value.toLowerCase(),k=0;rows.forEach(function(r){
var s=!q||r.textContent.toLowerCase().indexOf(q)>=0;r.hidden=!s;k+=s?1:0;});
n.textContent=k;n.setAttribute('data-by-script','1');}
f.addEventListener('input',apply);apply();})();
"""


def e(value) -> str:
    """Escaped text of any value (None as an empty string), for an element's content."""
    return html.escape("" if value is None else str(value), quote=False)


def attr(value) -> str:
    """Escaped text for a quoted attribute's value."""
    return html.escape("" if value is None else str(value), quote=True)


def _count(key: str, n: int) -> str:
    """A count the browser check reads back (data-count)."""
    return f'<span class="n" data-count="{attr(key)}">{n}</span>'


def _none(what: str = "None.") -> str:
    return f'<p class="none">{e(what)}</p>'


def _short(text, limit: int = 300) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + " …"


def _outcome(value) -> str:
    return value or "absent"


def _transition(item: dict) -> str:
    return f"{_outcome(item.get('baseline'))} → {_outcome(item.get('candidate'))}"


def _href(path, out) -> str:
    """A log's address: relative where it lies under the report directory (as report.md's)."""
    path, out = str(path), str(out or "").rstrip("/")
    return path[len(out) + 1 :] if out and path.startswith(out + "/") else path


def _link(path, out) -> str:
    if not path:
        return '<span class="none">(none)</span>'
    href = _href(path, out)
    return f'<a href="{attr(href)}"><code>{e(href)}</code></a>'


def variant_of(label: str, suffixes: dict) -> tuple[str, str]:
    """(test, variant) of a target label: its name less the variant's suffix (longest first)."""
    for name, suffix in sorted(suffixes.items(), key=lambda kv: -len(kv[1])):
        if suffix and label.endswith(suffix):
            return label[: -len(suffix)], name
    default = next((n for n, s in suffixes.items() if not s), "cpu")
    return label, default


def _suffixes() -> dict:
    """{variant: target suffix} from the variant table (tools/build_defs/variants.bzl)."""
    return {name: spec["suffix"] for name, spec in table.table()["VARIANTS"].items()}


# --- the sections -------------------------------------------------------------------------


def _title(data: dict) -> str:
    sides = data["sides"]
    return f"Gate: {sides['baseline']['description']} → {sides['candidate']['description']}"


def _verdict(data: dict) -> str:
    """report.md's first line; a category an older gate's report.json lacks counts as empty."""
    return report.verdict(dict(data, comparison=collections.defaultdict(list, data["comparison"])))


def _header(data: dict) -> str:
    code = data.get("exit_code")
    exits = "".join(
        f'<li class="{"this" if c == code else ""}">exit {c}: {e(meaning)}'
        + (" ← this run" if c == code else "")
        + "</li>"
        for c, meaning in report.VERDICTS.items()
    )
    return (
        f"<h1>{e(_title(data))}</h1>"
        f'<div id="verdict" class="banner exit-{attr(code)}" data-exit="{attr(code)}">'
        f'<div class="verdict">{e(_verdict(data))}</div>'
        f'<ul class="exits">{exits}</ul></div>'
    )


def _compared(data: dict) -> str:
    result = data["comparison"]
    cov = result.get("coverage", {})
    rows = [
        ("targets", "targets", cov.get("targets", 0)),
        ("targets_compared", "targets compared", cov.get("targets_compared", 0)),
        ("cases_compared", "cases compared", cov.get("cases_compared", 0)),
    ]
    for key, word, _ in GRID_CATEGORIES:
        if key in result:
            rows.append((key, word, len(result[key])))
    head = "".join(f"<th>{e(title)}</th>" for _, title, _ in rows)
    cells = "<tr>" + head + "</tr><tr>"
    cells += "".join(f"<td class=num>{_count(key, n)}</td>" for key, _, n in rows) + "</tr>"
    parts = [
        '<section id="compared"><h2>What was compared</h2>',
        f"<p>Targets asked for: <code>{e(data.get('targets'))}</code>. "
        f"Gate wall time: {e(round(data.get('wall_s') or 0))} s.</p>",
        f'<table class="counts">{cells}</table>',
    ]
    variants = data.get("variants")
    if variants:
        compared = ", ".join(variants.get("compared") or []) or "none"
        parts.append(f"<p><b>Variants compared on both sides:</b> {e(compared)}.</p>")
        items = "".join(
            f"<li><code>{e(item.get('variant'))}</code> not compared: {e(item.get('reason'))}"
            + (
                f" ({len(item['targets'])} targets that ran on one side left out)"
                if item.get("targets")
                else ""
            )
            + "</li>"
            for item in variants.get("not_compared") or []
        )
        if items:
            parts.append(f"<ul>{items}</ul>")
    if data.get("tree_warnings"):
        warnings = "".join(f"<li>{e(w)}</li>" for w in data["tree_warnings"])
        parts.append(f"<p><b>Trees:</b></p><ul>{warnings}</ul>")
    parts.append(_sides(data))
    if data.get("package_changes"):
        rows = "".join(
            f"<tr><td>{e(r.get('package'))}</td><td>{e(r.get('baseline') or 'absent')}</td>"
            f"<td>{e(r.get('candidate') or 'absent')}</td></tr>"
            for r in data["package_changes"]
        )
        parts.append(
            "<h3>Packages that differ</h3><table><tr><th>package</th><th>baseline</th>"
            f"<th>candidate</th></tr>{rows}</table>"
        )
    return "".join(parts) + "</section>"


def _sides(data: dict) -> str:
    rows = []
    for role in ("baseline", "candidate"):
        side = data["sides"][role]
        fp = side.get("fingerprint") or {}
        rows.append(
            f"<tr><th>{role}</th><td>{e(side.get('description'))}</td><td>{e(fp.get('torch'))}</td>"
            f"<td>{e(fp.get('cuda') or 'none (CPU build)')}</td><td>{e(fp.get('python'))}</td>"
            f"<td>{e('; '.join(fp.get('gpus') or []) or 'none')}</td>"
            f"<td class=num>{e(side.get('wall_s'))}</td></tr>"
        )
    table = (
        "<h3>Sides</h3><table><tr><th></th><th>what</th><th>torch</th><th>CUDA</th>"
        f"<th>Python</th><th>GPUs</th><th class=num>bazel test s</th></tr>{''.join(rows)}</table>"
    )
    hw = {role: data["sides"][role].get("hardware") or {} for role in ("baseline", "candidate")}
    if any(h.get("gpu_count") or h.get("host") for h in hw.values()):
        hw_rows = ""
        for key, title in report.HARDWARE_ROWS:
            values = [hw[role].get(key) for role in ("baseline", "candidate")]
            mark = " <b>(differs)</b>" if values[0] != values[1] else ""
            shown = "".join(f"<td>{e('—' if v in (None, '') else v)}</td>" for v in values)
            hw_rows += f"<tr><th>{e(title)}{mark}</th>{shown}</tr>"
        table += (
            "<h3>Hardware</h3><table><tr><th></th><th>baseline</th><th>candidate</th></tr>"
            f"{hw_rows}</table>"
        )
    return table


def _where(item: dict) -> str:
    case = item.get("case")
    what = f"<code>{e(case)}</code>" if case else "(whole target)"
    return f"<code>{e(item.get('target'))}</code> {what}"


def _confirmation(item: dict) -> str:
    confirmation = item.get("confirmation") or {}
    text = confirmation.get("verdict", "not confirmed")
    if "failed_runs" in confirmation:
        text += f" (failed {confirmation['failed_runs']} of {confirmation.get('runs')} runs)"
    if item.get("flaky_attempts"):
        text = f"flaky: {item['flaky_attempts']}; re-runs: {text}"
    return text


def _rates(item: dict) -> str:
    """The verdict on failure rates (tools/gate/rates.py), each side's rate and interval and
    the re-runs spent; "" where report.json has none (an older gate's, or a case not rated)."""
    decision = item.get("rates")
    if not isinstance(decision, dict) or not decision.get("line"):
        return ""
    reruns = decision.get("reruns") if isinstance(decision.get("reruns"), dict) else {}
    spent = ", ".join(f"{reruns[s]} on the {s}" for s in ("baseline", "candidate") if s in reruns)
    return str(decision["line"]) + (f"; re-runs: {spent}" if spent else "")


def _regression(n: int, item: dict, out) -> str:
    rows = [("first failure", f"<pre>{e(_short(item.get('message'), 2000))}</pre>")]
    if item.get("newly_declared"):
        rows.append(("declared", e(item["newly_declared"])))
    if item.get("stack"):
        rows.append(
            (
                "stack",
                "<details><summary>when it was stopped</summary>"
                f"<pre>{e(item['stack'])}</pre></details>",
            )
        )
    suspect = item.get("infra_suspect")
    if isinstance(suspect, dict):
        text = f"{suspect.get('rule', 'infra-like')}: {suspect.get('why', '')}"
        rows.append(("infra-like", e(text) + f" <code>{e(_short(suspect.get('evidence')))}</code>"))
    if _rates(item):
        rows.append(("rates", e(_rates(item))))
    if isinstance(item.get("stale"), dict):
        rows.append(("stale expectation", e(item["stale"].get("edit") or item["stale"])))
    if item.get("bisect"):
        rows.append(("culprit release", e(item["bisect"].get("line"))))
    rows.append(("log", _link(item.get("log"), out)))
    reruns = [_link(p, out) for p in item.get("rerun_logs") or []]
    if reruns:
        rows.append(("re-run logs", "<br>".join(reruns)))
    if item.get("reproduce"):
        rows.append(("reproduce", f'<code class="repro">{e(item["reproduce"])}</code>'))
    for key in sorted(set(item) - SHOWN_FIELDS):
        value = item[key]
        if value not in (None, "", [], {}):
            shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            rows.append((key.replace("_", " "), e(_short(shown))))
    body = "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return (
        f'<article class="reg-item" id="regression-{n}"><div><b>{n}.</b> {_where(item)}: '
        f"{e(_transition(item))}, <b>{e(_confirmation(item))}</b></div><dl>{body}</dl></article>"
    )


def _common_prefix(commands: list) -> str:
    """The words every command starts with (its environment, output base, `test` flags)."""
    words = [c.split(" ") for c in commands]
    common = []
    for group in zip(*words, strict=False):
        if len(set(group)) != 1:
            break
        common.append(group[0])
    return " ".join(common)


def _compact(n: int, item: dict, out, prefix: str) -> str:
    """A regression past the first DETAILED ones: one row with the same facts but the stack
    and re-run logs, its command less the prefix all share (a candidate that breaks
    everything regresses every case)."""
    command = item.get("reproduce") or ""
    rest = command[len(prefix) :] if prefix and command.startswith(prefix) else command
    log = item.get("log")
    log_cell = f'<a href="{attr(_href(log, out))}">log</a>' if log else "(none)"
    cells = (
        f"{n}",
        f"{_where(item)}<br>{e(_transition(item))}, <b>{e(_confirmation(item))}</b>",
        f"<code>{e(_short(item.get('message'), 160))}</code>"
        + (f"<br>{e(_short(_rates(item), 300))}" if _rates(item) else ""),
        log_cell,
        f"<code>{'…' if rest != command else ''}{e(rest)}</code>",
    )
    cells = "".join(f"<td>{c}</td>" for c in cells)
    return f'<tr id="regression-{n}">{cells}</tr>'


def _regressions(data: dict, out) -> str:
    items = data["comparison"].get("regressions") or []
    body = "".join(_regression(n, item, out) for n, item in enumerate(items[:DETAILED], 1))
    rest = items[DETAILED:]
    if rest:
        prefix = _common_prefix([i.get("reproduce") or "" for i in rest])
        prefix_line = (
            f"<p>Each command below starts with <code class=repro>{e(prefix)}</code></p>"
            if prefix
            else ""
        )
        rows = "".join(_compact(n, i, out, prefix) for n, i in enumerate(rest, DETAILED + 1))
        body += (
            f"<h3>Regressions {DETAILED + 1} to {len(items)}, one row each</h3>{prefix_line}"
            "<table><tr><th>#</th><th>case, outcome, re-runs</th><th>first failure</th>"
            f"<th>log</th><th>reproduce</th></tr>{rows}</table>"
        )
    return (
        f'<section id="regressions"><h2>Regressions {_count("regressions", len(items))}'
        f"</h2>{body or _none()}</section>"
    )


def grid_rows(result: dict, suffixes: dict) -> dict:
    """{(test, case): {variant: (category key, item)}}: every case (or whole target) a
    category lists, in the most telling category that lists it."""
    rank = {key: i for i, (key, _, _) in enumerate(GRID_CATEGORIES)}
    rows = {}
    for key, _, _ in GRID_CATEGORIES:
        for item in result.get(key) or []:
            test, variant = variant_of(item.get("target") or "", suffixes)
            cells = rows.setdefault((test, item.get("case") or ""), {})
            if variant not in cells or rank[key] < rank[cells[variant][0]]:
                cells[variant] = (key, item)
    return rows


def _columns(data: dict, rows: dict, suffixes: dict) -> list[str]:
    """The variants any target or listed case has, in the table's order."""
    present = {v for cells in rows.values() for v in cells}
    present |= {variant_of(t, suffixes)[1] for t in data.get("target_status") or {}}
    return [v for v in suffixes if v in present] or ["cpu"]


def _cell_text(key: str, item: dict) -> str:
    if key == "one_side" and "baseline" not in item:
        return item.get("reason") or "one side only"
    return _transition(item)


def _word(key: str, item: dict) -> tuple[str, str]:
    """A category's word and class; a declared case a flaky entry quarantines: a quarantine."""
    return ("quarantine", "quar") if key == "declared" and item.get("quarantine") else WORDS[key]


def _grid(data: dict, suffixes: dict) -> str:
    result = data["comparison"]
    rows = grid_rows(result, suffixes)
    columns = _columns(data, rows, suffixes)
    legend = "".join(
        f'<span class="badge {cls}">{e(word)}</span>'
        for key, word, cls in GRID_CATEGORIES
        if cls != "chg" or key == "other_changes"
    )
    legend += '<span class="badge quar">quarantine</span>'
    head = "".join(f"<th>{e(v)}</th>" for v in columns)
    body = []
    for (test, case), cells in sorted(rows.items()):
        worst = min(cells.values(), key=lambda c: [k for k, _, _ in GRID_CATEGORIES].index(c[0]))
        tds = []
        for variant in columns:
            if variant not in cells:
                tds.append("<td></td>")
                continue
            key, item = cells[variant]
            word, cls = _word(key, item)
            why = " why" if key == "one_side" and "baseline" not in item else ""
            # A regression's message is in its section; the others' on hovering the cell.
            text = item.get("message") or item.get("reason")
            title = f' title="{attr(_short(text, 160))}"' if text and key != "regressions" else ""
            tds.append(f'<td class="cell {cls}{why}"{title}>{e(_cell_text(key, item))}</td>')
        word, cls = _word(*worst)
        body.append(
            f'<tr><td><span class="badge {cls}">{e(word)}</span></td>'
            f"<td><code>{e(test)}</code></td>"
            f'<td class="case"><code>{e(case or "(whole target)")}</code></td>{"".join(tds)}</tr>'
        )
    cases = (
        '<table class="grid" id="grid-cases"><thead><tr><th>category</th><th>test</th>'
        f"<th>case</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        if body
        else _none("No case changed, failed on one side or was left out.")
    )
    compared = result.get("coverage", {}).get("cases_compared", 0)
    return (
        '<section id="grid"><h2>Cases × variants (baseline → candidate)</h2>'
        f"<p>Rows: every case a category lists ({_count('grid-rows', len(rows))}; a whole "
        f"target where no case shows it). Every other case had the same outcome on both sides "
        f"({compared} cases ran on both sides in all). "
        f'<span class="legend">{legend}</span></p>'
        f'<p><input type="search" id="grid-filter" placeholder="filter: a test, a case, a word '
        f'like regression"> shown: <span id="grid-shown">{len(rows)}</span> of {len(rows)}</p>'
        f"{cases}{_targets(data, rows, columns, suffixes)}</section>"
    )


def _status_class(before, after) -> str:
    if before is None or after is None:
        return "absent"
    b, c = before.split(" ")[0], after.split(" ")[0]
    if "SKIPPED" in (b, c):
        return "skip"
    if b in GREEN and c in GREEN:
        return "ok"
    if b in GREEN:
        return "bad"
    return "fix" if c in GREEN else "fail"


def _targets(data: dict, rows: dict, columns: list, suffixes: dict) -> str:
    """Every target's status on both sides, by test and variant, with its counts."""
    status = data.get("target_status") or {}
    if not status:
        return ""
    listed = {}
    for (test, _), cells in rows.items():
        for variant in cells:
            listed[(test, variant)] = listed.get((test, variant), 0) + 1
    by_test = {}
    for label, row in status.items():
        test, variant = variant_of(label, suffixes)
        by_test.setdefault(test, {})[variant] = row
    body = []
    for test, cells in sorted(by_test.items()):
        tds = []
        for variant in columns:
            row = cells.get(variant)
            if row is None:
                tds.append("<td></td>")
                continue
            b, c = row.get("baseline"), row.get("candidate")
            text = f"{b or 'absent'} → {c or 'absent'}"
            counts = []
            if row.get("baseline_cases") is not None or row.get("candidate_cases") is not None:
                counts.append(f"{row.get('baseline_cases')} / {row.get('candidate_cases')} cases")
            counts.append(f"{listed.get((test, variant), 0)} listed")
            tds.append(
                f'<td class="cell {_status_class(b, c)}">{e(text)}<br>'
                f'<span class="note">{e(", ".join(counts))}</span></td>'
            )
        body.append(f"<tr><td><code>{e(test)}</code></td>{''.join(tds)}</tr>")
    head = "".join(f"<th>{e(v)}</th>" for v in columns)
    return (
        f"<h3>Targets {_count('target_status', len(status))} by variant: status baseline → "
        "candidate (cases baseline / candidate; cases listed above)</h3>"
        f'<table class="grid" id="grid-targets"><tr><th>test</th>{head}</tr>{"".join(body)}</table>'
    )


def _timeline(data: dict) -> str:
    """Releases left to right, a row per bisected regression: the culprit cell outlined."""
    regressions = list(enumerate(data["comparison"].get("regressions") or [], 1))
    items = [(n, r) for n, r in regressions if r.get("bisect")]
    bisected = [(n, r) for n, r in items if r["bisect"].get("steps")]
    parts = ['<section id="culprits"><h2>Culprit releases (--bisect)</h2>']
    if not items:
        parts.append(_none("None: no regression was bisected (the gate runs it with --bisect)."))
        return "".join(parts) + "</section>"
    steps = {n: [(culprit._short(r), o) for r, o in r["bisect"]["steps"]] for n, r in bisected}
    order = sorted({r for s in steps.values() for r, _ in s}, key=lambda r: culprit._key(r))
    first = {}
    for n, s in steps.items():
        changed = culprit.first_changed(s)
        first[n] = None if changed is None else s[changed][0]
    head = "".join(
        f"<th>{e(r)}<br><span class=note>first changed: "
        f"{sum(1 for f in first.values() if f == r)}</span></th>"
        for r in order
    )
    # One row per sequence of outcomes, its regressions named (numbered past GROUP_NAMED).
    groups = {}
    for n, item in bisected:
        groups.setdefault(tuple(steps[n]), []).append((n, item))
    body = []
    for sequence, group in sorted(groups.items(), key=lambda g: -len(g[1])):
        outcomes, culprit_release = dict(sequence), first[group[0][0]]
        tds = []
        for r in order:
            o = outcomes.get(r)
            cls = "absent" if o is None else "ok" if o in compare.GOOD else "reg"
            cls += " culprit" if r == culprit_release else ""
            tds.append(f'<td class="{cls}">{e(o or "")}</td>')
        named = len(group) <= GROUP_NAMED
        links = ", ".join(
            f'<a href="#regression-{n}">'
            f"{e(item.get('case') or item.get('target')) if named else n}</a>"
            for n, item in group
        )
        body.append(f"<tr><td><b>{len(group)}</b>: {links}</td>{''.join(tds)}</tr>")
    if body:
        parts.append(
            f"<p>{_count('culprits', len(bisected))} regressions bisected, each on every "
            "release between the sides, a row per sequence of outcomes; the outlined cell is the "
            "first release whose outcome differs from the baseline's.</p>"
            f'<table class="timeline"><tr><th>regressions</th>{head}</tr>{"".join(body)}</table>'
        )
    lines = "".join(
        f"<li>{_where(r)}: {e(r['bisect'].get('line'))}</li>"
        for _, r in items
        if not r["bisect"].get("steps")
    )
    if lines:
        parts.append(f"<p>Not bisected:</p><ul>{lines}</ul>")
    return "".join(parts) + "</section>"


def _list(section_id: str, title: str, key: str, items: list, columns) -> str:
    """A section of a category: a table, or a "none" line."""
    if not items:
        return (
            f'<section id="{attr(section_id)}"><h2>{e(title)} {_count(key, 0)}</h2>'
            f"{_none()}</section>"
        )
    head = "".join(f"<th>{e(name)}</th>" for name, _ in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(item)}</td>" for _, cell in columns) + "</tr>"
        for item in items
    )
    return (
        f'<section id="{attr(section_id)}"><h2>{e(title)} {_count(key, len(items))}</h2>'
        f"<table><tr>{head}</tr>{body}</table></section>"
    )


def _target(item) -> str:
    return f"<code>{e(item.get('target'))}</code>"


def _case(item) -> str:
    return f"<code>{e(item.get('case'))}</code>" if item.get("case") else "(whole target)"


def _stale(item) -> str:
    stale = item.get("stale")
    return e(stale.get("edit") or "") if isinstance(stale, dict) else ""


def _sections(data: dict, out) -> str:
    result = data["comparison"]
    titles = dict(report.TITLES)
    where = [("target", _target), ("case", _case)]
    change = [("baseline → candidate", lambda i: e(_transition(i)))]
    parts = []
    if "fixes" in result:
        columns = where + change + [("stale expectation: the edit", _stale)]
        columns.append(("rates", lambda i: e(_rates(i))))
        parts.append(
            _list("fixes", titles.get("fixes", "Fixes"), "fixes", result["fixes"], columns)
        )
    if "infra" in result:
        columns = where + [
            ("side", lambda i: e(i.get("side"))),
            ("cause", lambda i: e(i.get("cause"))),
            ("why", lambda i: e(i.get("why"))),
            (
                "evidence",
                lambda i: f"<code>{e(_short(i.get('evidence') or i.get('message')))}</code>",
            ),
            ("rule", lambda i: e(i.get("rule"))),
            ("log", lambda i: _link(i.get("log"), out)),
        ]
        title = "Infrastructure failures (not compared: the host or a side's build, not torch)"
        parts.append(_list("infra", title, "infra", result["infra"], columns))
    if "declared" in result:
        columns = where + change + [("kind", lambda i: _word("declared", i)[0])]
        columns.append(("declaration", lambda i: e(_short(i.get("declared")))))
        title = "Declared outcomes on the candidate (expectations files, markers; quarantines)"
        parts.append(_list("declared", title, "declared", result["declared"], columns))
    if "one_side" in result:
        columns = where + [("why", lambda i: e(i.get("reason")))]
        title = "Ran on one side only (coverage is incomplete)"
        parts.append(_list("one-side", title, "one_side", result["one_side"], columns))
    for key in OTHER_LISTS:
        if key in result:
            columns = (
                where
                + change
                + [("message", lambda i: f"<code>{e(_short(i.get('message'), 200))}</code>")]
                + [("rates", lambda i: e(_rates(i)))]
            )
            parts.append(
                _list(key.replace("_", "-"), titles.get(key, key), key, result[key], columns)
            )
    informational = []
    for item in result.get("durations") or []:
        informational.append(
            f"<tr><td>duration</td><td><code>{e(item.get('target'))}</code> "
            f"{e(item.get('case') or '')}</td><td class=num>{e(item.get('baseline_s'))} s</td>"
            f"<td class=num>{e(item.get('candidate_s'))} s</td></tr>"
        )
    for item in result.get("rss") or []:
        informational.append(
            f"<tr><td>peak RSS</td><td><code>{e(item.get('target'))}</code></td>"
            f"<td class=num>{e(item.get('baseline_mib'))} MiB</td>"
            f"<td class=num>{e(item.get('candidate_mib'))} MiB</td></tr>"
        )
    if informational:
        parts.append(
            '<section id="informational"><h2>Durations and peak RSS beyond the thresholds '
            "(informational)</h2><table><tr><th></th><th>what</th><th>baseline</th>"
            f"<th>candidate</th></tr>{''.join(informational)}</table></section>"
        )
    return "".join(parts)


def page(data: dict, out=None, suffixes: dict | None = None) -> str:
    """report.html's text for report.json's `data`; `out` is the report directory (logs under
    it are linked relative to it); `suffixes` maps each variant to its target suffix (default:
    the variant table)."""
    suffixes = suffixes if suffixes is not None else _suffixes()
    body = (
        _header(data)
        + _compared(data)
        + _regressions(data, out)
        + _grid(data, suffixes)
        + _timeline(data)
        + _sections(data, out)
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(_title(data))}</title><style>{CSS}</style></head>"
        f"<body><main>{body}</main><script>{SCRIPT}</script></body></html>\n"
    )


class _Marks(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = {"counts": {}, "sections": [], "regressions": 0, "grid_rows": 0}
        self.found.update(shown=None, shown_by_script=False)
        self.text, self._count, self._shown, self._grid, self._body = [], None, False, 0, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" or attrs.get("id") == "verdict":
            self.found["sections"].append(attrs.get("id"))
        if (attrs.get("id") or "").startswith("regression-"):
            self.found["regressions"] += 1
        if "data-count" in attrs:
            self._count = attrs["data-count"]
        if attrs.get("id") == "grid-shown":
            self._shown = True
            self.found["shown_by_script"] = attrs.get("data-by-script") == "1"
        # The grid's body rows (a browser's DOM adds a tbody to every other table too).
        if tag == "table":
            self._grid += 1 if attrs.get("id") == "grid-cases" or self._grid else 0
        if tag == "tbody" and self._grid:
            self._body = True
        if tag == "tr" and self._grid and self._body:
            self.found["grid_rows"] += 1

    def handle_endtag(self, tag):
        if tag == "table" and self._grid:
            self._grid -= 1
        if tag == "tbody":
            self._body = False

    def handle_data(self, data):
        self.text.append(data)
        if self._count is not None:
            self.found["counts"].setdefault(self._count, []).append(int(data))
            self._count = None
        if self._shown:
            self.found["shown"], self._shown = int(data), False


def marks(text: str) -> dict:
    """What a reader of a page (its text, or a browser's DOM of it) finds: every count it
    shows (data-count: {key: [each value shown]}), the sections in order, the regressions
    shown, the grid's rows and how many the filter shows (and whether its script ran), and
    the page's text."""
    parser = _Marks()
    parser.feed(text)
    parser.close()
    return dict(parser.found, text="".join(parser.text))
