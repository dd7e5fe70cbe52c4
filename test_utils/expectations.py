"""Declared expected outcomes: which of a target's tests are expected to skip or fail, and why.

    torch_test(name = "test_x", expectations = "test_x.expectations.toml")

    [[expect]]
    test = "test_x.py::SomeClass::test_name"   # a node id, or an fnmatch pattern (*, ?, [..])
    outcome = "skip"                           # "skip" or "fail"
    reason = "requires cuda: the cpu target has no GPU"   # required: the measured reason
    match = "requires cuda"                    # optional regex the skip reason / failure must match
    torch = ["2.13", "2.14"]                   # optional: release keys (test_utils.releases)
    variants = ["cpu"]                         # optional: only in these variants

The torch_test macro puts the file in the targets' runfiles and its path in ENV. Tests are named
by their pytest node id without the file's directories (`test_x.py::...`), so the file reads the
same under Bazel and plain pytest. An entry that is exactly a collected test's id names that
test only (parametrized ids contain brackets); otherwise it is an fnmatch pattern. How the
outcomes are judged: test_utils.outcome_audit.
"""

import dataclasses
import fnmatch
import re
import tomllib

from test_utils import releases
from tools.hardware import envvars

ENV = envvars.EXPECTATIONS
OUTCOMES = ("skip", "fail")
# JUnit user property (item.user_properties) of a test with a declared outcome.
DECLARED_PROPERTY = "torch_test.declared"
_KEYS = ("test", "outcome", "reason", "match", "torch", "variants")


class ExpectationError(Exception):
    """The expectations file contradicts itself or the target."""


@dataclasses.dataclass(frozen=True)
class Entry:
    index: int  # 1-based position in the file, for messages
    test: str
    outcome: str
    reason: str
    match: str | None = None
    torch: tuple[str, ...] | None = None
    variants: tuple[str, ...] | None = None

    def __str__(self) -> str:
        return f"[[expect]] #{self.index} (test = {self.test!r}, outcome = {self.outcome!r})"

    def matches_text(self, text: str) -> bool:
        return self.match is None or re.search(self.match, text) is not None

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
    if match is not None:
        try:
            re.compile(match)
        except (re.error, TypeError) as error:
            raise bad(f"match {match!r} is not a regular expression: {error}") from error
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
    return Entry(index, raw["test"], raw["outcome"], raw["reason"], match, torch, named)


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


def assign(entries: list[Entry], nodeids: list[str]) -> tuple[dict[str, Entry], list[Entry]]:
    """{node id: its entry} over `nodeids`, and the entries that match none of them."""
    by_local = {local_id(n): n for n in nodeids}
    declared: dict[str, Entry] = {}
    unmatched = []
    for entry in entries:
        if entry.test in by_local:
            matched = [by_local[entry.test]]
        else:
            matched = [n for local, n in by_local.items() if fnmatch.fnmatchcase(local, entry.test)]
        if not matched:
            unmatched.append(entry)
        for nodeid in matched:
            if nodeid in declared:
                raise ExpectationError(
                    f"{nodeid} is declared twice: {declared[nodeid]} and {entry}"
                )
            declared[nodeid] = entry
    return declared, unmatched
