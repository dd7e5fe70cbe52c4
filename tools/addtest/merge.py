"""What add_test DIR writes, merged into the files a person may have edited since: each stanza
and entry it writes follows a `# add_test: generated <digest>` line (MARKER), the digest of
what it wrote; what is unchanged since (by digest: a formatter's reflow is no change) is
add_test's to replace or remove, everything else a person's to keep."""

import ast
import dataclasses
import fnmatch
import hashlib
import json
import re
import tomllib

from tools.addtest import stanza

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["read_build"]

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
    text = stanza.entry_text(entry) + "\n"
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


def merge_entries(
    text: str | None,
    measured: list[dict],
    name: str,
    moved: dict[str, str] | None = None,
    recorded: frozenset[str] = frozenset(),
):
    """The expectations file's new text (None: no entry left) and what changed, in words.
    `moved`: {file name: where its cases' entries are written now} of files whose target is
    another now. `recorded`: tests whose measured entry is the record's (not measured now)."""
    moved = moved or {}
    preamble, blocks = read_entries(text or "")
    said, out = [], []
    wanted = {e["test"]: e for e in measured}
    for block in blocks:
        if block.generated:
            new = wanted.pop(block.key, None)
            if new is None:
                file = str(block.key).partition("::")[0]
                why = f"{file} {moved[file]}" if file in moved else "not measured any more"
                said.append(f"{name}: removed the entry for {block.key}: {why}")
                continue
            if digest(new) == block.recorded:
                out.append(block)  # as written (its keys in any order)
                continue
            said.append(f"{name}: updated the entry for {block.key}")
            out.append(entry_block(new))
            continue
        out.append(block)  # a person's: edited, confirmed or written by hand
        whose = "edited" if block.recorded else "written by hand"
        for test in [t for t in wanted if _covers(block.value, t)]:
            new = wanted.pop(test)
            if _differs(block.value, new):
                match = f", match = {new['match']!r}" if "match" in new else ""
                when = "as last measured" if test in recorded else "measured now"
                said.append(
                    f"{name}: kept the entry for {block.key} as {whose}; {when}: "
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


def merge_build(
    text: str | None, stanzas: dict[str, str | None], where: dict[str, str] | None = None
):
    """The BUILD file's new text and what changed. `stanzas`: {stanza key (a file's name, or a
    pack's): its stanza, or None where the file could not be measured (what is there is
    kept)}. `where`: {file name: what became of it} ("is in test_b.py's stanza now"), said of
    each file of a stanza removed; a file it does not name is gone."""
    where = where or {}
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
                srcs = block.value.get("srcs")
                files = srcs if isinstance(srcs, list) else [block.key]
                fates = [f"{f} {where.get(f, 'is gone')}" for f in files]
                why = "the file is gone" if fates == [f"{block.key} is gone"] else ", ".join(fates)
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


def helpers_text(files: list[str]) -> str:
    """A py_library of the helper modules, with the directory on the tests' import path (as
    plain pytest puts a test's own directory there)."""
    srcs = "\n".join(stanza.starlark_list("srcs", files))
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
