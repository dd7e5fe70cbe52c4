"""Declared expected outcomes: which of a target's tests skip, fail, pass where their source
expects a failure, or are known to be flaky, and why.

    torch_test(name = "test_x", expectations = "test_x.expectations.toml")

    [[expect]]
    test = "test_x.py::SomeClass::test_name"   # a node id, or an fnmatch pattern (*, ?, [..])
    outcome = "skip"                           # "skip", "fail", "pass" or "flaky" (below)
    reason = "requires cuda: the cpu target has no GPU"   # required: the measured reason
    match = "requires cuda"                    # a skip's, fail's or flaky's, required: what
                                               # the outcome must say (below)
    count = 3                                  # required for a pattern: how many tests it names
    torch = ["2.13", "2.14"]                   # optional: release keys (releases.py)
    variants = ["cpu"]                         # optional: only in these variants
    proposed = true                            # written by tools/add_test.py: refused (below)
    teardown = "RuntimeError: Cannot clear callbacks"  # optional, a fail's: its teardown error
    issue = "https://github.com/org/repo/issues/64"    # a flaky's, required: where it is tracked
    until = "2027-03-31"                       # a flaky's, required: a date, or a release "2.16"
    rate = 0.05                                # a flaky's, required: its measured failure rate

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
- `outcome = "pass"` declares that a case the source expects to fail (an xfail marker, strict
  or not, or unittest.expectedFailure) passes on the torch the entry applies to (key it with
  `torch = [...]`): it has no `match` and no `teardown`, and the case is green only where its
  body ran and returned with every phase clean (recorded as `passed` with its `declared`
  reason, so a gate compares it as a pass). It fails the case where the case does not pass,
  and the file is refused where the case it names expects no failure (the runner reads that
  from its inventory, tools/runner/session/inventory.py).
- `outcome = "flaky"` quarantines a case known to fail now and then: it still runs every time,
  and a failure its `match` accepts (required, a fail's `Type: message-prefix`: a failure of
  another kind is not hidden) is green, recorded as `quarantined`; a pass stays `passed`. Both
  carry the entry's `quarantine` (record.Case) so the gate counts its failures over runs
  against `rate` (0 < rate < 1, the rate it was measured at). It takes `issue` (where it is
  tracked) and `until`: a date YYYY-MM-DD, through which it holds, or a torch release key
  (releases.py), before which it holds; past it every run of the case fails, with one line
  (`expiry`). A date is no input of the test action, so a dated `until` is refused where Bazel
  caches the target's result (spec `cached`: no `external` tag), whose cached pass would
  outlive it. No `teardown`. One run is one observation: the rate is the gate's to judge.
- `reason` is the author's word, shown beside the text that matched (log and JUnit property).
- `proposed = true` marks an entry tools/add_test.py wrote from what it measured (a failure, or
  an expected failure that passed, on this torch): the file is refused, naming the entry, until
  a person confirms it by removing that line, so no measured outcome is accepted without
  someone deciding to.

The torch_test macro puts the file in the targets' runfiles and its path in their spec
(tools/hardware/spec.py, `expectations`). Tests are named by their pytest node id without the
file's directories (`test_x.py::...`), so the file reads the same under Bazel and plain pytest.
An entry that is exactly a collected test's id names that test only (parametrized ids contain
brackets); otherwise it is an fnmatch pattern. How the outcomes are judged:
tools.runner.session.outcome_audit.

A file that cannot be read as declared (docs/runner.md says which) is refused with one
ExpectationError line naming the file, the entry and the fix: `read` and `assign` raise it, and
the session and the runner each fail the target with that line.
"""

import codecs
import dataclasses
import datetime
import fnmatch
import re
import tomllib

from tools.runner.process import witness
from tools.runner.session import releases, stable_text

OUTCOMES = ("skip", "fail", "pass", "flaky")
# The outcomes whose match is a failure's `Type: message-prefix`.
FAILURES = ("fail", "flaky")
# pytest's failure of a unittest case whose expectedFailure passed: a declared pass accepts it.
UNEXPECTED_SUCCESS = "Unexpected success"
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
    "issue",
    "until",
    "rate",
)
_QUARANTINE_KEYS = ("issue", "until", "rate")  # a flaky's, and only a flaky's
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
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
    source: str = ""  # the file it is in, for messages
    issue: str | None = None  # a flaky's: where it is tracked
    until: str | None = None  # a flaky's: a date YYYY-MM-DD or a torch release key
    rate: float | None = None  # a flaky's: the failure rate it was measured at

    def __str__(self) -> str:
        return f"[[expect]] #{self.index} (test = {self.test!r}, outcome = {self.outcome!r})"

    def matched(self, text: str) -> str | None:
        """The part of `text` (a skip's reason; a failure's failure_text) the entry accepts,
        folded (stable_text), or None."""
        if self.outcome not in FAILURES:
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

    @property
    def quarantine(self) -> dict | None:
        """A flaky's entry as the record keeps it beside each outcome (record.Case)."""
        if self.outcome != "flaky":
            return None
        return {
            "entry": self.index,
            "test": self.test,
            "issue": self.issue,
            "until": self.until,
            "rate": self.rate,
        }


def read(path: str, variants, variant: str, cached: bool = False) -> list[Entry]:
    """The entries of the file at `path` that apply to `variant` and the torch under test:
    what the session and the runner each read. `variants` are those an entry may name.
    `cached`: Bazel caches the target's result, so a dated quarantine is refused (its date is
    no input of the test action: a cached pass would outlive it)."""
    entries = load(path, variants)
    for entry in entries:
        if cached and entry.outcome == "flaky" and _DATE.fullmatch(entry.until):
            raise ExpectationError(
                f"{path}: [[expect]] #{entry.index}: until {entry.until!r} is a date, and Bazel "
                "caches this target's result, which would outlive it: give the torch_test tags = "
                '["external"] (Bazel then runs it every time, as a quarantined case must), or '
                "end the quarantine at a torch release"
            )
    return applicable(entries, variant)


def load(path: str, variants) -> list[Entry]:
    """The entries of the file at `path`; `variants` are those an entry may name."""
    try:
        with open(path, "rb") as f:
            data = f.read().removeprefix(codecs.BOM_UTF8)  # an editor's mark, no TOML
    except OSError as error:
        raise ExpectationError(f"{path}: cannot be read ({error})") from error
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ExpectationError(
            f"{path}: byte {data[error.start]:#04x} on line {line} is not UTF-8: write the "
            "file as UTF-8 text"
        ) from error
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ExpectationError(f"{path}: not valid TOML ({error}): correct that line") from error
    extra = sorted(set(document) - {"expect"})
    if extra:
        raise ExpectationError(f"{path}: unknown tables {extra}; write [[expect]] entries")
    entries = document.get("expect", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ExpectationError(f"{path}: write each entry as an [[expect]] table")
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
    issue, until, rate = _quarantine(raw, bad)
    match = raw.get("match")
    if raw["outcome"] == "pass":
        for key in ("match", "teardown"):
            if key in raw:
                raise bad(
                    f"a pass has no {key}: it declares that a case the source expects to fail "
                    "passes here; remove the key"
                )
        match = ""
    elif not isinstance(match, str):
        raise bad(
            "match is required: literal text that the skip's reason contains, or, for a fail, "
            "`Type: message-prefix`"
        )
    else:
        _check_match(match, "fail" if raw["outcome"] in FAILURES else raw["outcome"], bad)
    count = raw.get("count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise bad(f"count must be a positive integer, got {count!r}")
    torch = _strings(raw, "torch", bad)
    for key in torch or ():
        if not _release_key(key):
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
        index,
        raw["test"],
        raw["outcome"],
        raw["reason"],
        match,
        count,
        torch,
        named,
        teardown,
        path,
        issue,
        until,
        rate,
    )


def _quarantine(raw: dict, bad) -> tuple[str | None, str | None, float | None]:
    """A flaky's `issue`, `until` (as text) and `rate`, refused where one is missing or
    malformed; other outcomes take none of them."""
    if raw["outcome"] != "flaky":
        given = [k for k in _QUARANTINE_KEYS if k in raw]
        if given:
            raise bad(f"{', '.join(given)}: a flaky entry's keys; remove them, or write flaky")
        return None, None, None
    issue = raw.get("issue")
    if not isinstance(issue, str) or not issue.strip():
        raise bad("a flaky entry needs issue: a non-empty string saying where it is tracked")
    until = raw.get("until")
    if isinstance(until, datetime.date) and not isinstance(until, datetime.datetime):
        until = until.isoformat()  # TOML's bare date, until = 2027-03-31
    if not isinstance(until, str) or not _well_formed_until(until):
        raise bad(
            f"until {until!r} is neither a date YYYY-MM-DD nor a torch release key such as "
            "'2.16': write when the quarantine ends"
        )
    rate = raw.get("rate")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate < 1:
        raise bad(
            f"rate must be the failure rate the case was measured at, a number between 0 and 1 "
            f"(exclusive), got {rate!r}"
        )
    return issue, until, float(rate)


def _well_formed_until(until: str) -> bool:
    if _DATE.fullmatch(until):
        try:
            datetime.date.fromisoformat(until)
        except ValueError:
            return False
        return True
    return _release_key(until)


def _release_key(key: str) -> bool:
    try:
        return releases.release_key(releases.parse_release(key)) == key
    except ValueError:
        return False


def expiry(entry: Entry, today: datetime.date | None = None) -> str | None:
    """The one line failing a quarantine (a flaky entry) that has ended, or None while it
    holds: through its `until` date (today's, local), or on releases before its `until`
    release (the torch under test's)."""
    if entry.outcome != "flaky":
        return None
    if _DATE.fullmatch(entry.until):
        if (today or datetime.date.today()) <= datetime.date.fromisoformat(entry.until):
            return None
        when = entry.until
    else:
        running = releases.torch_release()
        if running < releases.parse_release(entry.until):
            return None
        when = f"torch {entry.until} (this is {releases.release_key(running)})"
    return (
        f"quarantine of {entry.test} expired on {when} (issue {entry.issue}): fix the test or "
        "renew the entry"
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
    keyed = next((e for e in ours if e.torch or _ends_with_release(e)), None)
    if keyed is None:
        return ours
    try:
        running = releases.release_key(releases.torch_release())
    except ImportError as error:  # the target has no torch (no distribution, no module)
        if not keyed.torch:
            raise _refused(
                keyed,
                f"until = {keyed.until!r} ends it with a torch release, and this target has no "
                "torch: write a date YYYY-MM-DD",
            ) from error
        raise _refused(
            keyed,
            f"torch = {list(keyed.torch)} applies it to torch releases, and this target has no "
            "torch: remove the torch key, or add torch to the target's deps",
        ) from error
    return [e for e in ours if e.torch is None or running in e.torch]


def _ends_with_release(entry: Entry) -> bool:
    return entry.until is not None and not _DATE.fullmatch(entry.until)


def _refused(entry: Entry, why: str) -> ExpectationError:
    """The one line refusing `entry`: its file, the entry, why and the fix."""
    where = f"{entry.source}: " if entry.source else ""
    return ExpectationError(f"{where}{entry}: {why}")


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
                now = sum(fnmatch.fnmatchcase(local, entry.test) for local in by_local)
                raise _refused(
                    entry,
                    f"a pattern names as many tests as its count: add count = N (it matches {now} "
                    "now)",
                )
            matched = [n for local, n in by_local.items() if fnmatch.fnmatchcase(local, entry.test)]
            if matched and len(matched) != entry.count:
                miscounted.append((entry, matched))
                continue
        if not matched:
            unmatched.append(entry)
        for nodeid in matched:
            if nodeid in declared:
                raise _refused(
                    entry,
                    f"{local_id(nodeid)} is declared twice, here and by {declared[nodeid]}: "
                    "keep one entry for it (remove one, or narrow the pattern)",
                )
            declared[nodeid] = entry
    stale = [f"{e}: matches no test" for e in unmatched]
    stale += [
        f"{e}: matches {len(m)} tests, its count says {e.count}: " + ", ".join(map(local_id, m))
        for e, m in miscounted
    ]
    return declared, stale


def check_passes(declared: dict[str, Entry], expected: dict[str, dict | None]) -> None:
    """Refuses a pass declared for a case that expects no failure: `expected` is the
    inventory's expectation of each case (verdict.judge's `info["xfail"]`), None for none."""
    for key, entry in sorted(declared.items()):
        if entry.outcome == "pass" and expected.get(key) is None:
            raise _refused(
                entry,
                f"{local_id(key)} expects no failure (no xfail marker, no "
                "unittest.expectedFailure), so there is no unexpected success to declare: "
                "remove the entry",
            )
