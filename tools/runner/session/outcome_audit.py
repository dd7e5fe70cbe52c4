"""pytest plugin (registered by the session plugin): a target passes only for tests that ran.

Fails the run, after the tests ran, for:
- a skip (setup, body, module import), an xfail that never ran its test (`run=False`,
  `pytest.xfail()` in setup or in the test body) and an unexpected pass (XPASS, as if every
  xfail were strict), unless the outcome is declared (below) or the test is not applicable;
  an expected failure that ran and failed (xfail marker, unittest.expectedFailure) passes;
- a stale declaration (below).
What the source defines but never runs (a class pytest cannot collect, a conftest's selection)
is the runner's to judge, from an inventory taken apart from this session
(tools/runner/session/inventory.py); what a test's call does (returns a coroutine, raises in a
thread) is the runner's witness's (tools/runner/process/witness.py).

Declared outcomes (tools.runner.session.expectations; the torch_test `expectations` file): a
declared skip passes only when the test skips (its reason matching `match`); a declared fail
passes only when the test ran and failed (reported as an xfail with the declared reason); a
declared pass only when a test that expects to fail passed (its XPASS or unittest's "Unexpected
success" reported as a pass); a declared flaky (a quarantine) passes when the test passes, or
fails as its match accepts (reported as a declared fail is), until the entry expires, after
which the test fails the target with the entry's one line (expectations.expiry); a declared
test that runs and passes (a skip's or fail's), a declared pass that did not pass, or an entry
matching no test of the variant's whole collection (before -k and sharding, so every shard
judges the same list), fails the target as stale. Each declared test carries the JUnit
property expectations.DECLARED_PROPERTY.

Not applicable (a test for hardware no variant offers, read from torch's decorators by
tools/runner/session/upstream_decorators.py): a test the session plugin placed so (the stash
key NOT_APPLICABLE: no marker a test author can write) and skipped at setup with a reason
starting record.NOT_APPLICABLE_PREFIX is accepted and carries the JUnit property
NOT_APPLICABLE_PROPERTY; no other skip is.
"""

import pytest

from tools.results import record
from tools.runner.session import expectations

NOT_APPLICABLE = pytest.StashKey[str]()
NOT_APPLICABLE_PROPERTY = "torch_test.not_applicable"


class OutcomeAudit:
    def __init__(self, variant: str, variant_of, entries: list[expectations.Entry], source: str):
        """`variant_of(item)`: the variant the item belongs to (after the plugin's selection)."""
        self.variant, self.variant_of = variant, variant_of
        self.entries, self.source = entries, source
        self.items: dict[str, pytest.Item] = {}
        self.declared: dict[str, expectations.Entry] = {}
        self.matched: dict[str, str] = {}  # node id -> the text its declaration accepted
        self.imperative_xfail: set[str] = set()
        self.ran = 0
        self.skipped: list[tuple[str, str]] = []
        self.xpassed: list[tuple[str, str]] = []
        self.stale: list[str] = []
        self.accepted: list[str] = []  # declared or not applicable: shown, not failing

    # Collection.

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, config, items):
        collected = list(items)  # before any selection: variant, -k, shard
        yield
        ours = [i.nodeid for i in collected if self.variant_of(i) == self.variant]
        try:
            self.declared, stale = expectations.assign(self.entries, ours)
        except expectations.ExpectationError as error:  # it names the file
            raise pytest.UsageError(str(error)) from error
        self.stale += [f"{why} (variant {self.variant!r})" for why in stale]
        for item in items:
            self.items[item.nodeid] = item
            entry = self.declared.get(item.nodeid)
            if entry:
                item.user_properties.append((expectations.DECLARED_PROPERTY, entry.property_value))

    # Running.

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield  # outermost: pytest's xfail handling has already run
        if _xfail_called_in_body(item, call):
            self.imperative_xfail.add(item.nodeid)
        entry = self.declared.get(item.nodeid)
        accepts_failure = entry and (entry.outcome == "fail" or _quarantined(entry))
        if accepts_failure and call.when == "call" and report.failed:
            matched = entry.matched(_failure_text(call))
            if matched is not None:
                report.outcome = "skipped"  # pytest's (and JUnit's) form of an expected failure
                report.wasxfail = f"declared: {entry.reason}"
                self._note_match(item, report, matched)
        elif entry and entry.teardown and call.when == "teardown" and report.failed:
            matched = entry.teardown_matched(_failure_text(call))
            if matched is not None and item.nodeid in self.matched:  # after the declared one
                report.outcome = "passed"  # declared with the failure: its `teardown`
                self._note_match(item, report, f"{self.matched[item.nodeid]}; then {matched}")
        elif entry and entry.outcome == "pass" and call.when == "call":
            expected = _unexpected_success(item, call, report)
            if expected is not None:  # declared: the pass its source did not expect
                report.outcome, report.longrepr = "passed", None
                if hasattr(report, "wasxfail"):
                    del report.wasxfail
                self._note_match(item, report, expected)
        elif entry and entry.outcome == "skip" and report.skipped:
            matched = entry.matched(_skip_reason(report))
            if matched is not None:
                self._note_match(item, report, matched)
        why = _not_applicable(item) if call.when == "setup" else None
        if why is not None and (NOT_APPLICABLE_PROPERTY, why) not in item.user_properties:
            item.user_properties.append((NOT_APPLICABLE_PROPERTY, why))
        return report

    def _note_match(self, item, report, matched: str) -> None:
        """Shows the text the declaration accepted: in the log's summary and in JUnit."""
        self.matched[item.nodeid] = matched
        prop = (expectations.MATCHED_PROPERTY, matched)
        item.user_properties.append(prop)
        report.user_properties.append(prop)

    def pytest_collectreport(self, report):
        if report.skipped:  # a whole module, e.g. pytest.importorskip at module level
            self.skipped.append((report.nodeid, _skip_reason(report)))

    def pytest_runtest_logreport(self, report):
        xfail = getattr(report, "wasxfail", None)
        imperative = report.when == "call" and report.nodeid in self.imperative_xfail
        if report.skipped and (xfail is None or report.when == "setup" or imperative):
            # A plain skip, or an xfail that stopped the test before it ran its body.
            reason = xfail or _skip_reason(report)
            if imperative:
                reason = f"pytest.xfail() in the test body: {reason}"
            self._judge_skip(report, reason)
        elif report.when == "call":
            self.ran += 1
            self._judge_run(report, xfail)

    def _judge_skip(self, report, reason: str) -> None:
        nodeid = report.nodeid
        item, entry = self.items.get(nodeid), self.declared.get(nodeid)
        why = _not_applicable(item) if item is not None else None
        if (
            why is not None
            and report.when == "setup"
            and reason.startswith(record.NOT_APPLICABLE_PREFIX)
        ):
            self.accepted.append(f"{nodeid}: {reason}")
        elif entry and entry.outcome == "skip" and entry.matched(reason) is not None:
            self.accepted.append(
                f"{nodeid}: declared skip ({entry.reason}); matched {entry.matched(reason)!r}"
            )
        elif entry and entry.outcome == "skip":
            self.skipped.append(
                (nodeid, f"{reason} (declared skip: {entry.match!r} does not match)")
            )
        else:
            self.skipped.append((nodeid, reason))

    def _judge_run(self, report, xfail) -> None:
        nodeid, entry = report.nodeid, self.declared.get(report.nodeid)
        if report.passed and xfail is not None:
            self.xpassed.append((nodeid, xfail))
        if entry is None:
            return
        if report.passed and (_is_subtest(report) or nodeid in self.matched):
            # A passing subtest says nothing of its case's declaration; a case whose declared
            # failure one of its subtests raised has not passed.
            return
        if entry.outcome == "flaky":
            self._judge_quarantine(nodeid, entry, report, xfail)
        elif entry.outcome == "skip":
            self.stale.append(f"{nodeid}: declared skip ({entry.reason}), but it ran ({entry})")
        elif xfail == f"declared: {entry.reason}":
            self.accepted.append(
                f"{nodeid}: declared fail ({entry.reason}); matched {self.matched.get(nodeid)!r}"
            )
        elif entry.outcome == "pass":
            if nodeid in self.matched:
                self.accepted.append(
                    f"{nodeid}: declared pass ({entry.reason}); {self.matched[nodeid]!r}"
                )
            elif report.passed:
                self.stale.append(
                    f"{nodeid}: declared pass ({entry.reason}), but it expects no failure: "
                    f"there is no unexpected success to declare ({entry})"
                )
            else:
                self.stale.append(
                    f"{nodeid}: declared pass ({entry.reason}), but it did not pass ({entry})"
                )
        elif report.passed:
            self.stale.append(f"{nodeid}: declared fail ({entry.reason}), but it passed ({entry})")
        elif report.failed:
            self.stale.append(
                f"{nodeid}: declared fail, but its failure does not match {entry.match!r} ({entry})"
            )

    def _judge_quarantine(self, nodeid, entry, report, xfail) -> None:
        expired = expectations.expiry(entry)
        if expired is not None:
            self.stale.append(f"{nodeid}: {expired} ({entry})")
        elif xfail == f"declared: {entry.reason}":
            self.accepted.append(
                f"{nodeid}: quarantined ({entry.reason}; issue {entry.issue}, rate {entry.rate}); "
                f"matched {self.matched.get(nodeid)!r}"
            )
        elif report.failed:
            self.stale.append(
                f"{nodeid}: quarantined, but its failure does not match {entry.match!r} ({entry})"
            )

    # Verdict.

    def pytest_sessionfinish(self, session, exitstatus):
        failing = self.skipped or self.xpassed or self.stale
        if failing and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        write = terminalreporter
        if self.accepted:
            write.section("declared and not-applicable outcomes (accepted)")
            for line in self.accepted:
                write.line(line)
        if self.stale:
            write.section("stale expectations fail this target", red=True)
            for line in self.stale:
                write.line(line)
            write.line(f"Correct or remove these entries of {self.source}.")
        if self.xpassed:
            write.section("unexpected passes (XPASS) fail this target", red=True)
            for nodeid, reason in self.xpassed:
                write.line(f"{nodeid}: expected to fail ({reason}) but passed")
            write.line("Remove the xfail marker, or fix what it expects.")
        if self.skipped:
            write.section("skipped tests fail this target", red=True)
            for nodeid, reason in self.skipped:
                write.line(f"{nodeid}: {reason}")
            write.line(
                "Declare hardware with test_utils.hardware markers instead of skipping, or the "
                "skip in the target's expectations file (torch_test's expectations); "
                f"{self.ran} test(s) ran, {len(self.skipped)} skipped."
            )


def _quarantined(entry) -> bool:
    """A flaky entry that has not expired: it accepts the failure its match names."""
    return entry.outcome == "flaky" and expectations.expiry(entry) is None


def _failure_text(call) -> str:
    """`QualifiedType: message` of the call's failure: what a declared fail's match reads."""
    if call.excinfo is None:
        return ""
    return expectations.failure_text(call.excinfo.value)


def _unexpected_success(item, call, report) -> str | None:
    """How pytest reported the call of a case that expected to fail and passed (a strict xfail's
    "[XPASS(strict)] ...", unittest's "Unexpected success", a lax xfail's XPASS), or None."""
    if report.passed and getattr(report, "wasxfail", None) is not None:
        return f"[XPASS] {report.wasxfail}"
    if not report.failed:
        return None
    if call.excinfo is None and str(report.longrepr).startswith("[XPASS(strict)]"):
        return str(report.longrepr)
    expecting = (getattr(item, "obj", None), getattr(item, "cls", None))
    if (
        call.excinfo is not None
        and call.excinfo.errisinstance(pytest.fail.Exception)
        and str(call.excinfo.value.msg).startswith(expectations.UNEXPECTED_SUCCESS)
        and any(getattr(o, "__unittest_expecting_failure__", False) for o in expecting)
    ):
        return expectations.UNEXPECTED_SUCCESS
    return None


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _not_applicable(item) -> str | None:
    """Why the test is not applicable to the hardware table (the plugin's placement), or None."""
    return item.stash.get(NOT_APPLICABLE, None)


def _xfail_called_in_body(item, call) -> bool:
    """pytest.xfail() raised by the test body (unittest's expectedFailure raises it too)."""
    if call.when != "call" or call.excinfo is None:
        return False
    if not call.excinfo.errisinstance(pytest.xfail.Exception):
        return False
    expecting = (getattr(item, "obj", None), getattr(item, "cls", None))
    return not any(getattr(o, "__unittest_expecting_failure__", False) for o in expecting)


def _is_subtest(report) -> bool:
    """A report pytest makes of one subtest (unittest's subTest, the subtests fixture)."""
    return type(report).__name__ == "SubtestReport"
