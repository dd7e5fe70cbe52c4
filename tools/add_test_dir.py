"""add_test for a directory: writes DIR/BUILD.bazel and the expectations files of its tests.

    python3 tools/add_test.py DIR [--no-run] [--jobs N]      (DIR inside this repository)

Every `test_*.py` of DIR is collected and (unless --no-run) run once, as tools/add_test.py does
for one file, in the tests' environment with the GPUs hidden: one process per file, N at a time
(default: the cores), with no Bazel command unless @pypi was never fetched. On a host with GPUs,
the cases of each GPU variant it has the GPUs for then run, one file at a time. Then it writes:
  - DIR/BUILD.bazel: one torch_test per file that could be collected (add_test.stanza);
  - DIR/test_x.expectations.toml: the measured outcomes (add_test.proposals): skips with their
    reason, failures as `fail` entries and expected failures that passed as `pass` entries,
    both with `proposed = true`, which the runner refuses until a person removes that line.
Each stanza and entry it writes is preceded by `# add_test: generated <digest>`, the digest of
what it wrote. On a re-run it replaces what it wrote that is unchanged since (by digest, so a
formatter's reflow is no change), removes what it wrote for a file or an outcome that is gone,
and keeps everything else: a stanza or entry a person edited (a confirmed entry among them) or
wrote, saying so where the new measurement differs from it. Every change is printed.
Exit status 1 when a file could not be collected (its stanza is not written or kept as it was).
"""

import ast
import concurrent.futures
import dataclasses
import fnmatch
import hashlib
import json
import os
import pathlib
import re
import sys
import tomllib

from tools import add_test, add_test_deps, add_test_pack
from tools.hardware import probe

MARKER = "# add_test: generated "
_MARKER_LINE = re.compile(r"^# add_test: generated ([0-9a-f]{12})$")
HEADER = "# Written by tools/add_test.py; edit freely: an entry you change is yours and is kept.\n"
_LOAD = 'load("//tools/build_defs:torch_test.bzl", "torch_test", "torch_test_suites")\n'
_SUITES = "torch_test_suites()"


def digest(value) -> str:
    """What a marker records of a stanza or entry: order of keys and lists aside."""

    def canonical(v):
        if isinstance(v, dict):
            return {k: canonical(x) for k, x in v.items()}
        if isinstance(v, list):
            return sorted((canonical(x) for x in v), key=json.dumps)
        return v

    text = json.dumps(canonical(value), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def test_files(directory: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in directory.glob("test_*.py") if p.is_file())


def measure(files, env, run: bool, jobs: int, gpus: int) -> dict:
    """{file: its collection result, or the text of why it could not be had}, `jobs` at once;
    then the cases of the GPU variants a host of `gpus` GPUs can run."""

    def one(path):
        try:
            return add_test.collect(path, env, run)
        except SystemExit as error:  # collect's message: the child's output
            return str(error)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = dict(zip(files, pool.map(one, files), strict=True))
    if run:  # a file's GPU variants after every cpu run, one file at a time: none share a GPU
        for path, result in results.items():
            if not isinstance(result, str):
                add_test.measure_gpu_variants(path, env, result, gpus)
    return results


# ---- blocks of a file: what add_test wrote (a marker and its digest) and everything else


@dataclasses.dataclass
class Block:
    lines: list[str]  # the block's text, its marker line included
    key: str | None  # the file (stanza) or test (entry) it is for; None: not ours to match
    value: object  # what the digest is of (the entry's table, the stanza's arguments)
    recorded: str | None  # the marker's digest; None: no marker (a person wrote it)

    @property
    def generated(self) -> bool:
        """Written by add_test and unchanged since."""
        return self.recorded is not None and self.recorded == digest(self.value)


def _marker_above(lines: list[str], start: int) -> str | None:
    found = _MARKER_LINE.match(lines[start - 1].rstrip("\n")) if start > 0 else None
    return found.group(1) if found else None


def read_entries(text: str) -> tuple[list[str], list[Block]]:
    """An expectations file as its lines before the first entry and one block per entry."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == "[[expect]]"]
    heads = [s - 1 if _marker_above(lines, s) else s for s in starts]
    blocks = []
    for n, (head, start) in enumerate(zip(heads, starts, strict=True)):
        end = heads[n + 1] if n + 1 < len(heads) else len(lines)
        try:
            (entry,) = tomllib.loads("".join(lines[start:end]))["expect"]
        except (tomllib.TOMLDecodeError, ValueError, KeyError):
            entry = None  # the runner says what is wrong with it; here it is kept as it is
        key = entry.get("test") if isinstance(entry, dict) else None
        blocks.append(Block(lines[head:end], key, entry, _marker_above(lines, start)))
    return lines[: heads[0] if heads else len(lines)], blocks


def entry_block(entry: dict) -> Block:
    text = add_test.entry_text(entry) + "\n"
    lines = [MARKER + digest(entry) + "\n", *text.splitlines(keepends=True)]
    return Block(lines, entry["test"], entry, digest(entry))


def _covers(entry, test: str) -> bool:
    name = entry.get("test", "") if isinstance(entry, dict) else ""
    return name == test or bool(re.search(r"[*?]", name)) and fnmatch.fnmatchcase(test, name)


def _differs(kept, measured: dict) -> bool:
    """Whether a kept entry says another outcome or match than measured (its reason, variants
    and `proposed` are the person's)."""
    if not isinstance(kept, dict):
        return True
    return any(kept.get(k) != measured.get(k) for k in ("outcome", "match"))  # a pass: no match


def merge_entries(text: str | None, measured: list[dict], name: str):
    """The expectations file's new text (None: no entry left) and what changed, in words."""
    preamble, blocks = read_entries(text or "")
    said, out = [], []
    wanted = {e["test"]: e for e in measured}
    for block in blocks:
        if block.generated:
            new = wanted.pop(block.key, None)
            if new is None:
                said.append(f"{name}: removed the entry for {block.key}: not measured any more")
                continue
            if digest(new) != block.recorded:
                said.append(f"{name}: updated the entry for {block.key}")
            out.append(entry_block(new))
            continue
        out.append(block)  # a person's: edited, confirmed or written by hand
        whose = "edited" if block.recorded else "written by hand"
        for test in [t for t in wanted if _covers(block.value, t)]:
            new = wanted.pop(test)
            if _differs(block.value, new):
                match = f", match = {new['match']!r}" if "match" in new else ""
                said.append(
                    f"{name}: kept the entry for {block.key} as {whose}; measured now: "
                    f"{new['outcome']}{match}"
                )
    for entry in wanted.values():
        out.append(entry_block(entry))
        said.append(
            f"{name}: added {'a PROPOSED' if entry.get('proposed') else 'a'} {entry['outcome']} "
            f"entry for {entry['test']}"
        )
    if not out:
        return None, said + ([f"{name}: removed (no entry left)"] if text else [])
    head = "".join(preamble) or HEADER + "\n"
    body = "".join("".join(b.lines) for b in out)
    return head + body, said


# ---- BUILD.bazel


def _arguments(call: ast.Call) -> dict:
    out = {}
    for kw in call.keywords:
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:  # glob(), select(), a variable: compared as written
            out[kw.arg] = ast.dump(kw.value)
    return out


def _src_of(arguments: dict) -> str | None:
    """A stanza's key: its file's name, or a pack's (srcs) target name."""
    src = arguments.get("src")
    if isinstance(src, str):
        return src
    name = arguments.get("name")
    if not isinstance(name, str):
        return None
    return name if "srcs" in arguments else f"{name}.py"


def read_build(text: str) -> tuple[list[str], list[tuple[int, int, Block]]]:
    """The BUILD file's lines and its torch_test calls: (first line, end, block), first line
    being the marker's where there is one."""
    lines = text.splitlines(keepends=True)
    found = []
    for node in ast.parse(text).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "torch_test"):
            continue
        start, end = node.lineno - 1, node.end_lineno
        recorded = _marker_above(lines, start)
        head = start - 1 if recorded else start
        arguments = _arguments(call)
        found.append((head, end, Block(lines[head:end], _src_of(arguments), arguments, recorded)))
    return lines, found


def stanza_block(text: str) -> Block:
    (node,) = ast.parse(text).body
    arguments = _arguments(node.value)
    value = digest(arguments)
    return Block([MARKER + value + "\n", text + "\n"], _src_of(arguments), arguments, value)


def merge_build(text: str | None, stanzas: dict[str, str | None]):
    """The BUILD file's new text and what changed. `stanzas`: {file name: its stanza, or None
    where the file could not be measured (what is there is kept)}."""
    if not text:
        text = _LOAD + "\n" + _SUITES + "\n"
    lines, found = read_build(text)
    said, replaced, seen = [], {}, set()
    for head, end, block in found:
        seen.add(block.key)
        new = stanzas.get(block.key)
        if block.key not in stanzas:
            if block.generated:
                replaced[head] = (end, [])
                moved = any(f'"{block.key}"' in s for s in stanzas.values() if s)
                why = "its files are arranged otherwise now" if moved else "the file is gone"
                said.append(f"BUILD.bazel: removed {block.key}'s stanza: {why}")
            continue
        if new is None:
            continue
        wanted = stanza_block(new)
        if block.generated:
            if wanted.recorded != block.recorded:
                replaced[head] = (end, wanted.lines)
                said.append(f"BUILD.bazel: updated {block.key}'s stanza")
        elif digest(block.value) != wanted.recorded:
            whose = "edited" if block.recorded else "written by hand"
            said.append(
                f"BUILD.bazel: kept {block.key}'s stanza as {whose}; add_test would write:\n" + new
            )
    out, i = [], 0
    while i < len(lines):
        if i in replaced:
            end, new_lines = replaced[i]
            out += new_lines
            i = end
        else:
            out.append(lines[i])
            i += 1
    added = [f for f, s in stanzas.items() if s is not None and f not in seen]
    if added:
        new_text = "".join("".join(stanza_block(stanzas[f]).lines) + "\n" for f in added)
        at = next((n for n, line in enumerate(out) if line.startswith(_SUITES)), len(out))
        out[at:at] = [new_text]
        said += [f"BUILD.bazel: added {f}'s stanza" for f in added]
    return "".join(out), said


# ---- helper modules: the directory's own modules its tests import (PyTorch's test/distributed
# has model_registry.py beside its tests, imported as a top-level module)

HELPERS = "helpers"
_PY_LOAD = 'load("//tools/build_defs:python.bzl", "py_library")\n'


def helper_files(directory: pathlib.Path, results: dict) -> list[str]:
    """Files of `directory` that its tests' collection imported and that no py_library but
    add_test's own lists (a test file another test imports among them)."""
    builds = add_test_deps.BuildFiles(add_test.ROOT)
    found = set()
    for path, result in results.items():
        if isinstance(result, str):
            continue
        for file in result["modules"].values():
            if not file or not os.path.isabs(file):
                continue
            real = pathlib.Path(os.path.realpath(file))
            if real.parent != directory.resolve() or real == path.resolve():
                continue
            if builds.library_of(real) in (None, f"//{builds.package_of(real)}:{HELPERS}"):
                found.add(real.name)
    return sorted(found)


def helpers_text(files: list[str]) -> str:
    """A py_library of the helper modules, with the directory on the tests' import path (as
    plain pytest puts a test's own directory there)."""
    srcs = "\n".join(add_test._list("srcs", files))
    return f'py_library(\n    name = "{HELPERS}",\n{srcs}\n    imports = ["."],\n)'


def merge_helpers(text: str | None, files: list[str]) -> tuple[str, list[str]]:
    """The BUILD file's text with the helpers' py_library added, updated or removed (one a
    person edited or wrote is kept), and what changed."""
    if not text:
        text = _LOAD + "\n" + _SUITES + "\n"
    lines = text.splitlines(keepends=True)
    old = None
    for node in ast.parse(text).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "py_library":
            if _arguments(call).get("name") == HELPERS:
                start, end = node.lineno - 1, node.end_lineno
                recorded = _marker_above(lines, start)
                value = digest(_arguments(call))
                old = (start - 1 if recorded else start, end, recorded == value)
    new = [MARKER + digest(_arguments(ast.parse(helpers_text(files)).body[0].value)) + "\n"]
    new += [helpers_text(files) + "\n"] if files else []
    if old is not None:
        head, end, generated = old
        if not generated:
            return text, [f"BUILD.bazel: kept the py_library {HELPERS} as edited or written"]
        if "".join(lines[head:end]) == "".join(new):
            return text, []
        lines[head:end] = new if files else []
        said = f"BUILD.bazel: {'updated' if files else 'removed'} the py_library {HELPERS}"
        return "".join(lines), [said]
    if not files:
        return text, []
    at = max((n + 1 for n, line in enumerate(lines) if line.startswith("load(")), default=0)
    lines[at:at] = ["\n", *new]
    if _PY_LOAD not in lines:
        lines.insert(0, _PY_LOAD)
    return "".join(lines), [f"BUILD.bazel: added the py_library {HELPERS}: {', '.join(files)}"]


# ---- the command


def _result_line(path: pathlib.Path, result: dict, proposed, ran: bool) -> str:
    placed = result["placed"]
    counts = {}
    for variant, _ in placed.values():
        counts[variant or "no variant"] = counts.get(variant or "no variant", 0) + 1
    line = f"{path.name}: " + (" ".join(f"{v}={n}" for v, n in counts.items()) or "no cases")
    for variant, run in add_test.measured_runs(result) if ran else []:
        ours = [e["outcome"] for e in proposed.entries if e["variants"] == [variant]]
        line += (
            f"; {variant} cases measured: {len(run['skips'])} skipped, {ours.count('fail')} "
            f"failed (proposed), {len(add_test.expected_failures(run))} failed as expected, "
            f"{ours.count('pass')} passed against their expectation (proposed)"
        )
    return line


@dataclasses.dataclass
class Measured:
    """One collected file: what its target or pack is written from."""

    path: pathlib.Path
    result: dict
    entries: list[dict]  # the proposed expectations entries of the cases measured here
    deps: list[str]


def _owned_groups(directory: pathlib.Path, build_text: str | None, files) -> dict:
    """{stanza key: [its files]} of the torch_test stanzas a person owns: edited or written by
    hand, or whose expectations file holds an entry a person edited or wrote (a confirmed
    proposal). add_test keeps how those files are arranged."""
    owned = {}
    for _, _, block in read_build(build_text)[1] if build_text else []:
        args = block.value
        members = args.get("srcs") if isinstance(args.get("srcs"), list) else [block.key]
        members = [m for m in members if isinstance(m, str) and m in files]
        if block.key is None or not members:
            continue
        toml = directory / str(args.get("expectations", ""))
        mine = toml.is_file() and any(not b.generated for b in read_entries(toml.read_text())[1])
        if not block.generated or mine:
            owned[block.key] = members
    return owned


def _arrange(measured: dict[str, Measured], owned: dict[str, list[str]]) -> dict[str, list]:
    """{stanza key: [its files]}: add_test_pack's plan, the owned groups kept."""
    files = []
    for name, m in measured.items():
        placed = m.result["placed"]
        ran = sum(1 for p in placed.values() if p[0] == "cpu")
        kind = tuple(sorted({(p[0] or "", tuple(p[1])) for p in placed.values()}))
        seconds = m.result.get("seconds", 0.0)
        alone = add_test.runs_alone(m.result)
        files.append(add_test_pack.Measured(name, seconds, ran, len(placed), kind, alone))
    keys = {tuple(group): key for key, group in owned.items()}
    out = {}
    for group in add_test_pack.plan(files, list(owned.values())):
        if tuple(group) in keys:
            out[keys[tuple(group)]] = group
        elif len(group) == 1:
            out[group[0]] = group
        else:
            out[add_test_pack.pack_name(group)] = group
    return out


def _write_entries(toml: pathlib.Path, entries: list[dict]) -> list[str]:
    old = toml.read_text() if toml.is_file() else None
    new, said = merge_entries(old, entries, toml.name)
    if new is None and old is not None:
        toml.unlink()
    elif new is not None and new != old:
        toml.write_text(new)
    return said


def write(directory: pathlib.Path, results: dict, env, ran: bool) -> tuple[list[str], int]:
    """Writes DIR's files from the measured `results`; what it says, and the exit status."""
    said, status, stanzas, measured = [], 0, {}, {}
    build = directory / "BUILD.bazel"
    old = build.read_text() if build.is_file() else None
    # Written first: the tests' deps name it (add_test_deps reads the BUILD file).
    with_helpers, changes = merge_helpers(old, helper_files(directory, results))
    if with_helpers != (old or ""):
        build.write_text(with_helpers)
    said += changes
    for path, result in results.items():
        if isinstance(result, str) or result["errors"]:
            status = 1
            why = result if isinstance(result, str) else result["errors"][0]
            said.append(f"{path.name}: CANNOT BE COLLECTED ON THIS HOST: its stanza is not written")
            said += ["    " + line for line in why.splitlines()[-8:]]
            stanzas[path.name] = None
            continue
        if not result["placed"]:  # a module other tests import, named like a test
            said.append(f"{path.name}: NO TEST CASES: pytest collects nothing, no stanza written")
            continue
        proposed = add_test.proposals(path, result) if ran else add_test.Proposals([], [])
        said.append(_result_line(path, result, proposed, ran))
        if ran:
            said += [f"    {note}" for note in add_test.crash_notes(result)]
        said += [f"    {note}" for note in proposed.notes]
        lost = add_test.uncollected_classes(path.read_text(), result["placed"])
        if lost:
            said.append("    DEFINES TESTS NOTHING COLLECTS: " + ", ".join(lost))
        deps = add_test_deps.labels_for(result, path, add_test.ROOT, env.manifest)
        said += [f"    deps: {note}" for note in deps.notes]
        measured[path.name] = Measured(path, result, proposed.entries, deps.labels)
    old_tomls = {
        b.value.get("expectations")
        for _, _, b in (read_build(old)[1] if old else [])
        if b.generated and isinstance(b.value.get("expectations"), str)
    }
    arranged = _arrange(measured, _owned_groups(directory, old, measured))
    written = set()
    for key, group in arranged.items():
        members = [measured[name] for name in group]
        packed = len(group) > 1 or key != group[0]
        stem = key if packed else members[0].path.stem
        toml = directory / f"{stem}.expectations.toml"
        if ran:
            said += _write_entries(toml, [e for m in members for e in m.entries])
        written.add(toml.name)
        placed = {n: p for m in members for n, p in m.result["placed"].items()}
        deps = sorted({d for m in members for d in m.deps}, key=lambda d: (d.startswith("@"), d))
        args = add_test.stanza_args(members[0].result) if not packed else None
        stanzas[key] = add_test.stanza(
            directory / f"{stem}.py", placed, deps, toml.is_file(), group if packed else None, args
        )
        if packed:
            said.append(f"{key}: packs {', '.join(group)}")
    for name in sorted(old_tomls - written):  # a target no longer written: its generated entries
        if ran:
            said += _write_entries(directory / name, [])
    new, changes = merge_build(with_helpers, stanzas)
    said += changes
    if new != old:
        build.write_text(new)
    return said, status


def main(argv: list[str]) -> int:
    args = list(argv)
    jobs = os.cpu_count() or 1
    if "--jobs" in args:
        at = args.index("--jobs")
        jobs = int(args[at + 1])
        del args[at : at + 2]
    run = "--no-run" not in args
    (directory,) = [pathlib.Path(a).resolve() for a in args if not a.startswith("--")]
    if add_test.ROOT not in directory.parents:
        raise SystemExit(f"{directory} is not a directory of this repository ({add_test.ROOT})")
    files = test_files(directory)
    if not files:
        raise SystemExit(f"{directory}: no test_*.py files")
    env = add_test.tests_environment()
    gpus = probe.visible_gpu_count()
    print(
        f"# {directory}: {len(files)} files, {jobs} at a time, with {env.described}, GPUs hidden"
        f"; then the GPU variants {gpus} GPU(s) can run, a file at a time"
    )
    said, status = write(directory, measure(files, env, run, jobs, gpus), env, run)
    print("\n".join(said))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
