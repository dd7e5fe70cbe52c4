"""The stanza model: what add_test writes from a measured file. Its torch_test call, the
expectations entries its measured outcomes propose (with what no entry can say), the notes a
run that did not end normally leaves, and whether the file must run alone. File mode prints
these; directory mode writes them."""

import ast
import dataclasses
import pathlib
import re

from tools.addtest.measure import ENDED_NORMALLY, NATIVE_TRACEBACKS, PYTEST_CRASHED, measured_runs
from tools.hardware import probe, variants
from tools.runner.session import expectations, stable_text


def starlark_list(name: str, values: list[str]) -> list[str]:
    """`name = [values]` as buildifier writes it, four spaces in (nothing for no values)."""
    if not values:
        return []
    if len(values) == 1:
        return [f'    {name} = ["{values[0]}"],']
    return [f"    {name} = ["] + [f'        "{v}",' for v in values] + ["    ],"]


def stanza(
    path: pathlib.Path,
    placed: dict[str, list],
    deps: list[str],
    expectations: bool = False,
    srcs: list[str] | None = None,
    args: list[str] | None = None,
    size: str | None = None,
    tags: list[str] | None = None,
) -> str:
    """The torch_test call, its arguments in buildifier's order (name, the others by name,
    deps), so that formatting the BUILD file changes nothing. `srcs`: a pack of those files,
    named after `path` (then `path.stem` is the pack's name, not a file's). `args`: pytest
    arguments the file's measuring run needed (collect's `pytest_args`). `size`: the Bazel
    size its measured cost needs (pack.size_for; None: torch_test's default). `tags`: those
    its measured ranks need (pack.cpu_tags)."""
    used_variants = [v for v in variants.VARIANTS if any(p[0] == v for p in placed.values())]
    arguments = {}
    if used_variants != ["cpu"]:
        arguments["variants"] = starlark_list("variants", used_variants)
    for feature in probe.FEATURES:
        used = [
            v for v in used_variants if any(p[0] == v and feature in p[1] for p in placed.values())
        ]
        arguments[feature] = starlark_list(feature, used)
    if expectations:
        arguments["expectations"] = [f'    expectations = "{path.stem}.expectations.toml",']
    if srcs:
        arguments["srcs"] = starlark_list("srcs", srcs)
    if args:
        arguments["args"] = starlark_list("args", args)
    if size:
        arguments["size"] = [f'    size = "{size}",']
    if tags:
        arguments["tags"] = starlark_list("tags", tags)
    lines = ["torch_test(", f'    name = "{path.stem}",']
    for name in sorted(arguments):
        lines += arguments[name]
    lines += starlark_list("deps", deps)
    return "\n".join(lines + [")"])


# An absolute path that folding left (under no root stable_text knows: a temporary directory)
# differs from run to run; not a path's end after unittest's `[N chars]`, which hid its start.
_VOLATILE = re.compile(r"(?<![\w.\]])/[^\s'\"]+")
_MAX_LITERAL = 80


def stable_prefix(text: str) -> str:
    """The start of `text` an entry can match literally: its first line (after any leading
    whitespace), folded as the runner folds it (stable_text), up to the first absolute path
    left, at most _MAX_LITERAL characters."""
    text = stable_text.fold(text)
    lead = len(text) - len(text.lstrip())
    end = text.find("\n", lead)
    end = len(text) if end < 0 else end
    volatile = _VOLATILE.search(text, lead, end)
    if volatile:
        end = volatile.start()
    return text[: min(end, lead + _MAX_LITERAL)].rstrip()


@dataclasses.dataclass
class Proposals:
    """What the measured cpu cases ask of the expectations file, and what no entry can say."""

    entries: list[dict]
    notes: list[str]


def local_name(path: pathlib.Path, nodeid: str) -> str:
    """A case's node id as its expectations entry names it: from the file's name on."""
    return path.name + nodeid[nodeid.index("::") :] if "::" in nodeid else nodeid


def _fail_match(seen: dict) -> tuple[str | None, str]:
    """A fail's (or teardown's) literal `Type: message-prefix` for a failure the runner's
    witness read, or None and why not."""
    text = f"{seen['type']}: {seen['msg']}"
    kind = seen["type"]
    if not expectations._TYPE_NAME.fullmatch(kind):  # a class defined in a function
        kind = kind.rsplit(".", 1)[-1]
    prefix = stable_prefix(seen["msg"])
    if not seen["msg"]:
        match = kind  # no message at all (a bare assert): the type alone declares exactly that
    elif not expectations.long_enough(prefix):
        return None, f"{text[:200]!r}, a message too short to declare"
    else:
        match = f"{kind}: {prefix}"
    # The runner's own reading of the entry must accept what was measured.
    if expectations.Entry(0, "", "fail", "", match).matched(text) is None:
        return None, f"{text[:200]!r}, which no literal entry matches"
    return match, ""


def proposals(path: pathlib.Path, result: dict) -> Proposals:
    """Entries for the measured outcomes of `result` (tools/addtest/collect.py, --run) and of
    its GPU variants' runs, each entry for its variant: each skip with torch's own reason; each
    failure as a `fail` entry whose match is the literal start of its first failure, and each
    case that expected to fail (xfail, unittest.expectedFailure) and passed as a `pass` entry,
    both `proposed = true` so that a person decides; none for a case that failed as it
    expected to."""
    entries, notes = [], []
    for variant, run in measured_runs(result):
        _propose(path, run, variant, entries, notes)
    for variant, error in result.get("gpu_errors", {}).items():
        last = (error.strip().splitlines() or ["?"])[-1]
        notes.append(f"the {variant} cases could not be measured on this host: {last}")
    return Proposals(entries, notes)


def _propose(path: pathlib.Path, result: dict, variant: str, entries: list, notes: list) -> None:
    """proposals() for one variant's run."""
    shown = "" if variant == "cpu" else f" [{variant}]"
    for nodeid, reason in result.get("skips", []):
        literal = stable_prefix(reason)
        test = local_name(path, nodeid)
        if not expectations.long_enough(literal):
            notes.append(f"{test}{shown}: skipped ({reason!r}), a reason too short to declare")
            continue
        entries.append(
            {
                "test": test,
                "outcome": "skip",
                "reason": literal,
                "match": literal,
                "variants": [variant],
            }
        )
    torch = f"torch {result['torch']}" if result.get("torch") else "this torch"
    for nodeid, first, later in result.get("fails", []):
        test = local_name(path, nodeid)
        match, why = _fail_match(first)
        if match is None:
            notes.append(f"{test}{shown}: fails with {why}")
            continue
        entry = {
            "test": test,
            "outcome": "fail",
            "reason": f"fails on {torch} as measured by add_test",
            "match": match,
            "variants": [variant],
            "proposed": True,
        }
        if later is not None:  # a teardown error after the failure (a registry left dirty)
            entry["teardown"], why = _fail_match(later)
            if entry["teardown"] is None:
                notes.append(f"{test}{shown}: failed, then its teardown failed with {why}")
                continue
        entries.append(entry)
    for nodeid in result.get("xpassed", []):  # expected to fail (xfail / expectedFailure)
        entries.append(
            {
                "test": local_name(path, nodeid),
                "outcome": "pass",
                "reason": f"expected to fail, passes on {torch} as measured by add_test",
                "variants": [variant],
                "proposed": True,
            }
        )


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def entry_text(entry: dict) -> str:
    """One [[expect]] entry as TOML, keys in the order expectations.py lists them."""
    lines = ["[[expect]]"]
    for key, value in entry.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, list):
            lines.append(f"{key} = [{', '.join(toml_string(v) for v in value)}]")
        else:
            lines.append(f"{key} = {toml_string(value)}")
    return "\n".join(lines) + "\n"


def expected_failures(result: dict) -> list[str]:
    """Cases that failed as they expected to: their target accepts that, with no entry."""
    return result.get("xfails", [])


def uncollected_classes(source: str, placed: dict[str, list]) -> list[str]:
    """Classes of `source` that define test methods of which no case was collected."""
    names = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        tests = [
            f.name
            for f in node.body
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name.startswith("test")
        ]
        # Device-type classes are collected as ClassCPU / ClassCUDA.
        if tests and not any(f"::{node.name}" in nodeid for nodeid in placed):
            names.append(f"{node.name} ({len(tests)} test methods)")
    return names


def stanza_args(result: dict) -> list[str]:
    """The pytest arguments the stanza passes: those a measuring run of any variant needed
    (collect's `pytest_args`; a stanza's args reach every variant's target)."""
    return next((r["pytest_args"] for _, r in measured_runs(result) if r.get("pytest_args")), [])


def runs_alone(result: dict) -> bool:
    """Whether a measured file needs a target of its own: a run of one of its variants did not
    end normally (in a pack, the process it ends would take the other files' cases with it), or
    it runs only with pytest arguments of its own (stanza_args)."""
    ended = all(r.get("exit", 0) in ENDED_NORMALLY for _, r in measured_runs(result))
    return not ended or bool(stanza_args(result))


def crash_notes(result: dict) -> list[str]:
    """What a reader of the stanza must know of a measuring run that did not end normally, the
    cpu variant's or a GPU variant's."""
    notes = []
    for variant, run in measured_runs(result):
        shown = "" if variant == "cpu" else f"the {variant} cases' run: "
        notes += [shown + line for line in _crash_notes(run)]
    return notes


def _crash_notes(result: dict) -> list[str]:
    """crash_notes() of one variant's run."""
    if result.get("crashed_with_defaults"):
        crash = result["crashed_with_defaults"]
        return [
            f"PYTEST CRASHED (INTERNALERROR, exit {crash['exit']}) after {crash['started']} of "
            f"{len(result['placed'])} cases; with {' '.join(result['pytest_args'])} (Python's "
            f"traceback formatter, not pytest's) it ran {result['started']}: the stanza passes it"
        ]
    code = result.get("exit", 0)
    if code in ENDED_NORMALLY:
        return []
    if code == PYTEST_CRASHED:
        return [
            f"PYTEST CRASHED (INTERNALERROR) after {result.get('started', 0)} of "
            f"{len(result['placed'])} cases, with {' '.join(NATIVE_TRACEBACKS)} too: its later "
            "cases never ran; it runs alone, so no other file's cases are lost with it"
        ]
    return [
        f"PYTEST ENDED ABNORMALLY (exit status {code}): its later cases never ran; it runs "
        "alone, so no other file's cases are lost with it"
    ]
