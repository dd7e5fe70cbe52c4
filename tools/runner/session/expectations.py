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
    proposed = true                            # written by tools/add_test.py: refused (below)
    teardown = "RuntimeError: Cannot clear callbacks"  # optional, a fail's: its teardown error

A declaration says what it accepts, so that it cannot also accept what it was not written for:
- `match` is literal text, never a regular expression. A skip's `match` must occur in the
  skip's reason. A fail's `match` is `Type: message-prefix`: the failure reads
  `QualifiedType: message` (failure_text; builtins have no module: `AssertionError: Lists
  differ`), its type must be the entry's Type (written bare, `Unsupported`, or qualified,
  `torch._dynamo.exc.Unsupported`), and its message must start with the entry's prefix, so a
  new ImportError is not the assertion that was declared. A failure with no message at all (a
  bare `assert` in torch) is declared by its type alone, `match = "AssertionError"`, which
  accepts that type with an empty message and nothing else.
- Both the match and the text it is held against are folded first (stable_text: paths,
  unittest's `[N chars]`, addresses, pids, the ranks of torch's multi-process messages), so an
  entry written from one run matches the same failure in another, wherever the file runs.
- A skip's literal and a fail's message prefix hold at least MIN_LITERAL characters that are
  not whitespace, once folded; a shorter one would accept failures it was not written for and
  is refused.
- An fnmatch pattern names as many tests as its `count`; when it comes to cover more or fewer
  (a new test whose name fits), the entry is stale.
- A fail declares the case's first failure, in whichever phase; a teardown error after it (a
  callback registry left dirty by the failed call, say) is declared by `teardown`, in the same
  `Type: message-prefix` form, and fails the case where it is not.
- `reason` is the author's word, shown beside the text that matched (log and JUnit property).
- `proposed = true` marks an entry tools/add_test.py wrote from what it measured (a failure on
  this torch): the file is refused, naming the entry, until a person confirms it by removing
  that line, so no measured failure is accepted without someone deciding to.

The torch_test macro puts the file in the targets' runfiles and its path in their spec
(tools/hardware/spec.py, `expectations`). Tests are named by their pytest node id without the
file's directories (`test_x.py::...`), so the file reads the same under Bazel and plain pytest.
An entry that is exactly a collected test's id names that test only (parametrized ids contain
brackets); otherwise it is an fnmatch pattern. How the outcomes are judged:
tools.runner.session.outcome_audit.
"""

import dataclasses
import fnmatch
import re
import tomllib

from tools.runner.process import witness
from tools.runner.session import releases, stable_text

OUTCOMES = ("skip", "fail")
# JUnit user properties (item.user_properties) of a test with a declared outcome: the
# declaration, and the text of the outcome that its match accepted.
DECLARED_PROPERTY = "torch_test.declared"
MATCHED_PROPERTY = "torch_test.declared_match"
_KEYS = (
    "test",
    "outcome",
    "reason",
    "match",
    "count",
    "torch",
    "variants",
    "proposed",
    "teardown",
)
_PATTERN = re.compile(r"[*?]")  # wildcards: a pattern (brackets alone: a parametrized id)
# Enough text that a declaration names its failure and not any other of that type.
MIN_LITERAL = 8
_TYPE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_SEPARATOR = ": "  # between a failure's type and its message
_FAIL_FORM = (
    "a fail's match is literal text `Type: message-prefix`: the exception type as the log shows "
    "it (bare, `Unsupported`, or qualified, `torch._dynamo.exc.Unsupported`; builtins bare, "
    "`AssertionError`), then ': ' and the start of its message, e.g. "
    "'AssertionError: Lists differ'; or the type alone for a failure with no message"
)


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
    teardown: str | None = None  # a fail's teardown error after the declared failure

    def __str__(self) -> str:
        return f"[[expect]] #{self.index} (test = {self.test!r}, outcome = {self.outcome!r})"

    def matched(self, text: str) -> str | None:
        """The part of `text` (a skip's reason; a failure's failure_text) the entry accepts,
        folded (stable_text), or None."""
        if self.outcome != "fail":
            match = stable_text.fold(self.match)
            return match if match in stable_text.fold(text) else None
        return _prefix_matched(self.match, text)

    def teardown_matched(self, text: str) -> str | None:
        """The part of a teardown's failure_text its `teardown` accepts, after the failure the
        entry declares; None where it declares none or another."""
        return _prefix_matched(self.teardown, text) if self.teardown else None

    def mismatch(self, text: str) -> str | None:
        """Why a fail's entry does not accept the failure_text `text`; None when it does."""
        return _mismatch(stable_text.fold(self.match), stable_text.fold(text))

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
    proposed = raw.get("proposed", False)
    if not isinstance(proposed, bool):
        raise bad(f"proposed must be true or false, got {proposed!r}")
    if proposed:
        raise bad(
            f"a proposed entry (test = {raw['test']!r}, outcome = {raw['outcome']!r}, match = "
            f"{raw.get('match')!r}): confirm it by removing proposed = true"
        )
    if raw["outcome"] not in OUTCOMES:
        raise bad(f"outcome {raw['outcome']!r} is not one of {list(OUTCOMES)}")
    match = raw.get("match")
    if not isinstance(match, str):
        raise bad(
            "match is required: literal text that the skip's reason contains, or, for a fail, "
            "`Type: message-prefix`"
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
    teardown = raw.get("teardown")
    if teardown is not None:
        if raw["outcome"] != "fail" or not isinstance(teardown, str):
            raise bad("teardown is a fail's: `Type: message-prefix` of the teardown error")
        _check_match(teardown, "fail", bad)
    return Entry(
        index, raw["test"], raw["outcome"], raw["reason"], match, count, torch, named, teardown
    )


def _check_match(match: str, outcome: str, bad) -> None:
    """Refuses a match too short to name one outcome, or a fail's not in `Type: prefix` form
    (or `Type` alone: that type with an empty message)."""
    literal = match
    if outcome == "fail":
        if _TYPE_NAME.fullmatch(match):
            return  # no message: it accepts an empty one only, so nothing is too short
        declared, separator, literal = match.partition(_SEPARATOR)
        if not separator or not _TYPE_NAME.fullmatch(declared):
            raise bad(f"match {match!r}: {_FAIL_FORM}")
    shown = "its message prefix" if outcome == "fail" else "it"
    if not long_enough(literal):
        raise bad(
            f"match {match!r}: {shown} holds fewer than {MIN_LITERAL} characters besides "
            f"whitespace once folded ({stable_text.fold(literal)!r}: paths, counts, addresses, "
            "pids and ranks folded), so it could accept outcomes it was not written for: copy "
            "more of the "
            + ("failure's message from its start" if outcome == "fail" else "skip's reason")
            + " as the log shows it (literal text, not a regular expression)"
        )


def long_enough(literal: str) -> bool:
    """Whether a skip's literal or a fail's message prefix holds MIN_LITERAL characters
    besides whitespace once folded (stable_text)."""
    return len("".join(stable_text.fold(literal).split())) >= MIN_LITERAL


def _prefix_matched(match: str, text: str) -> str | None:
    """The `Type: prefix` part of the failure_text `text` that `match` accepts (both folded:
    stable_text), or None."""
    match, text = stable_text.fold(match), stable_text.fold(text)
    if _mismatch(match, text) is not None:
        return None
    kind = text.partition(_SEPARATOR)[0]
    if _SEPARATOR not in match:
        return kind  # the type alone: the failure has no message
    return text[: len(kind) + len(_SEPARATOR) + len(match.partition(_SEPARATOR)[2])]


def _mismatch(match: str, text: str) -> str | None:
    """Why `match` (`Type: prefix`) does not accept the failure_text `text` (both folded);
    None when it does."""
    kind, _, message = text.partition(_SEPARATOR)
    declared, _, prefix = match.partition(_SEPARATOR)
    if not _same_type(declared, kind):
        spellings = {repr(kind.rsplit(".", 1)[-1])}
        if _TYPE_NAME.fullmatch(kind):  # not a class defined in a function (<locals>)
            spellings.add(repr(kind))
        return (
            f"its type is {kind}, not the entry's {declared} (an entry names this type as "
            + " or ".join(sorted(spellings, key=len))
            + ")"
        )
    if _SEPARATOR not in match:  # `Type` alone: a failure with no message
        if message:
            return f"the entry declares {declared} with no message, and it has {message[:200]!r}"
        return None
    if not message.startswith(prefix):
        return f"the failure's message does not start with {prefix!r}: {message[:200]!r}"
    return None


def _same_type(declared: str, kind: str) -> bool:
    """`declared` names the qualified type `kind`: in full, by its last component, or as
    builtins.X for a builtin (which failure_text writes bare)."""
    return declared in (kind, kind.rsplit(".", 1)[-1]) or (
        "." not in kind and declared == f"builtins.{kind}"
    )


def failure_text(exc: BaseException) -> str:
    """`QualifiedType: message` of `exc`, what a fail's match is held against; a builtin's type
    has no module (`AssertionError: ...`), as the runner's witness names it."""
    try:
        message = str(exc)
    except Exception as error:  # a broken __str__ must not hide the failure
        message = f"<str() raised {type(error).__name__}>"
    return f"{witness.type_name(type(exc))}{_SEPARATOR}{message}"


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
