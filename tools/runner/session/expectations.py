"""Declared expected outcomes: which of a target's tests are expected to skip or fail, and why.

    torch_test(name = "test_x", expectations = "test_x.expectations.toml")

    [[expect]]
    test = "test_x.py::SomeClass::test_name"   # a node id, or an fnmatch pattern (*, ?, [..])
    outcome = "skip"                           # "skip" or "fail"
    reason = "requires cuda: the cpu target has no GPU"   # required: the measured reason
    match = "requires cuda"                    # required: what the outcome must say (below)
    count = 3                                  # required for a pattern: how many tests it names
    torch = ["2.13", "2.14"]                   # optional: release keys (releases.py)
    variants = ["cpu"]                         # optional: only in these variants

A declaration says what it accepts, so that it cannot also accept what it was not written for:
- `match` is a regular expression, searched in a skip's reason; for a fail it is matched from
  the start of `ExceptionType: message` and must begin with the type (`AssertionError: Lists
  differ`), so a new ImportError is not the assertion that was declared. A pattern that matches
  the empty string (`""`, `.*`, `x?`) matches every text and is refused, as is a fail's message
  part that does.
- An fnmatch pattern names as many tests as its `count`; when it comes to cover more or fewer
  (a new test whose name fits), the entry is stale.
- `reason` is the author's word, shown beside the text that matched (log and JUnit property).

The torch_test macro puts the file in the targets' runfiles and its path in ENV. Tests are named
by their pytest node id without the file's directories (`test_x.py::...`), so the file reads the
same under Bazel and plain pytest. An entry that is exactly a collected test's id names that
test only (parametrized ids contain brackets); otherwise it is an fnmatch pattern. How the
outcomes are judged: tools.runner.session.outcome_audit.
"""

import dataclasses
import fnmatch
import re
import tomllib

from tools.hardware import envvars
from tools.runner.session import releases

ENV = envvars.EXPECTATIONS
OUTCOMES = ("skip", "fail")
# JUnit user properties (item.user_properties) of a test with a declared outcome: the
# declaration, and the text of the outcome that its match accepted.
DECLARED_PROPERTY = "torch_test.declared"
MATCHED_PROPERTY = "torch_test.declared_match"
_KEYS = ("test", "outcome", "reason", "match", "count", "torch", "variants")
# A fail's match starts with the exception's type name, then ": ".
_PATTERN = re.compile(r"[*?]")  # wildcards: a pattern (brackets alone: a parametrized id)
_FAIL_MATCH = re.compile(r"([A-Za-z_]\w*): (.*)", re.S)


class ExpectationError(Exception):
    """The expectations file contradicts itself or the target."""


@dataclasses.dataclass(frozen=True)
class Entry:
    index: int  # 1-based position in the file, for messages
    test: str
    outcome: str
    reason: str
    match: str
    count: int | None = None
    torch: tuple[str, ...] | None = None
    variants: tuple[str, ...] | None = None

    def __str__(self) -> str:
        return f"[[expect]] #{self.index} (test = {self.test!r}, outcome = {self.outcome!r})"

    def matched(self, text: str) -> str | None:
        """The part of `text` (a skip's reason; a failure's `Type: message`) the entry accepts."""
        if self.outcome == "fail":
            found = re.match(self.match, text)
        else:
            found = re.search(self.match, text)
        return found.group(0) if found else None

    @property
    def property_value(self) -> str:
        return f"{self.outcome}: {self.reason}"


def load(path: str, variants) -> list[Entry]:
    """The entries of the file at `path`; `variants` are those an entry may name."""
    try:
        with open(path, "rb") as f:
            document = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ExpectationError(f"{path}: {error}") from error
    extra = sorted(set(document) - {"expect"})
    if extra:
        raise ExpectationError(f"{path}: unknown tables {extra}; write [[expect]] entries")
    entries = document.get("expect", [])
    if not isinstance(entries, list):
        raise ExpectationError(f"{path}: write each entry as [[expect]]")
    return [_entry(path, index, raw, variants) for index, raw in enumerate(entries, start=1)]


def _entry(path: str, index: int, raw: dict, variants) -> Entry:
    def bad(message):
        return ExpectationError(f"{path}: [[expect]] #{index}: {message}")

    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise bad(f"unknown keys {unknown}; known: {list(_KEYS)}")
    for key in ("test", "outcome", "reason"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise bad(f"{key} is required (a non-empty string)")
    if raw["outcome"] not in OUTCOMES:
        raise bad(f"outcome {raw['outcome']!r} is not one of {list(OUTCOMES)}")
    match = raw.get("match")
    if not isinstance(match, str):
        raise bad(
            "match is required: what the skip's reason, or the failure's `Type: message`, must "
            "say (a regular expression)"
        )
    _check_match(match, raw["outcome"], bad)
    count = raw.get("count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise bad(f"count must be a positive integer, got {count!r}")
    torch = _strings(raw, "torch", bad)
    for key in torch or ():
        try:
            well_formed = releases.release_key(releases.parse_release(key)) == key
        except ValueError:
            well_formed = False
        if not well_formed:
            raise bad(f"torch release {key!r} is not a release key such as '2.13'")
    named = _strings(raw, "variants", bad)
    unknown = sorted(set(named or ()) - set(variants))
    if unknown:
        raise bad(f"variants {unknown} are not among this source's variants {sorted(variants)}")
    return Entry(index, raw["test"], raw["outcome"], raw["reason"], match, count, torch, named)


def _check_match(match: str, outcome: str, bad) -> None:
    """Refuses a match that would accept any text (for a fail: any message of its type)."""
    try:
        pattern = re.compile(match)
    except re.error as error:
        raise bad(f"match {match!r} is not a regular expression: {error}") from error
    if pattern.search("") is not None:
        raise bad(f"match {match!r} matches the empty string, so it would accept any text")
    if outcome != "fail":
        return
    parts = _FAIL_MATCH.fullmatch(match)
    if not parts:
        raise bad(
            f"match {match!r}: a fail's match starts with the exception type, then ': ' and the "
            "message, e.g. 'AssertionError: Lists differ'"
        )
    try:
        message = re.compile(parts.group(2))
    except re.error as error:
        raise bad(f"match {match!r}: its message part is no regular expression: {error}") from error
    if message.match("") is not None:
        raise bad(f"match {match!r}: its message part matches any message")


def _strings(raw: dict, key: str, bad) -> tuple[str, ...] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise bad(f"{key} must be a non-empty list of strings, got {value!r}")
    return tuple(value)


def applicable(entries: list[Entry], variant: str) -> list[Entry]:
    """The entries that apply to `variant` and the torch under test (imported only if asked)."""
    ours = [e for e in entries if e.variants is None or variant in e.variants]
    if not any(e.torch for e in ours):
        return ours
    running = releases.release_key(releases.torch_release())
    return [e for e in ours if e.torch is None or running in e.torch]


def local_id(nodeid: str) -> str:
    """`test_x.py::T::test_a` for `dynamo_tests/test_x.py::T::test_a`."""
    path, sep, rest = nodeid.partition("::")
    return path.rsplit("/", 1)[-1] + sep + rest


def assign(entries: list[Entry], nodeids: list[str]) -> tuple[dict[str, Entry], list[str]]:
    """{node id: its entry} over `nodeids`, and why each stale entry is stale (it matches none
    of them, or a pattern now names another number of tests than its count)."""
    by_local = {local_id(n): n for n in nodeids}
    declared: dict[str, Entry] = {}
    unmatched, miscounted = [], []
    for entry in entries:
        if entry.test in by_local:
            matched = [by_local[entry.test]]
        elif not _PATTERN.search(entry.test):
            matched = []  # a node id no longer collected
        else:
            if entry.count is None:
                raise ExpectationError(
                    f"{entry}: a pattern names as many tests as its count: add count = N (it "
                    "matches {} now)".format(
                        sum(fnmatch.fnmatchcase(local, entry.test) for local in by_local)
                    )
                )
            matched = [n for local, n in by_local.items() if fnmatch.fnmatchcase(local, entry.test)]
            if matched and len(matched) != entry.count:
                miscounted.append((entry, matched))
                continue
        if not matched:
            unmatched.append(entry)
        for nodeid in matched:
            if nodeid in declared:
                raise ExpectationError(
                    f"{nodeid} is declared twice: {declared[nodeid]} and {entry}"
                )
            declared[nodeid] = entry
    stale = [f"{e}: matches no test" for e in unmatched]
    stale += [
        f"{e}: matches {len(m)} tests, its count says {e.count}: " + ", ".join(map(local_id, m))
        for e, m in miscounted
    ]
    return declared, stale
