"""pytest plugin (registered by test_utils.pytest_plugin): a target passes only for tests that ran.

Fails the run, after the tests ran, for:
- a skip (setup, body, module import), an xfail that never ran its test (`run=False`,
  `pytest.xfail()` in setup or in the test body) and an unexpected pass (XPASS, as if every
  xfail were strict), unless the outcome is declared (below) or the test is not applicable;
  an expected failure that ran and failed (xfail marker, unittest.expectedFailure) passes;
- what the module defines but pytest does not run: a collection warning (a test class with
  `__init__`, ...), and a unittest.TestCase with test methods that yields no test (it inherits
  `__test__ = False`), unless the class itself says `__test__ = False` (declared abstract) or
  the command line asked for other classes only (plain `pytest test_x.py::SomeClass::test_y`;
  the runner always names the whole file);
- a coroutine test method of a plain unittest.TestCase (unittest calls it and never awaits the
  coroutine): the test fails at setup, naming itself;
- a stale declaration (below).

Declared outcomes (test_utils.expectations; the torch_test `expectations` file): a declared skip
passes only when the test skips (its reason matching `match`); a declared fail passes only when
the test ran and failed (reported as an xfail with the declared reason); a declared test that
runs and passes, or an entry matching no test of the variant's whole collection (before -k and
sharding, so every shard judges the same list), fails the target as stale. Each declared test
carries the JUnit property expectations.DECLARED_PROPERTY.

Not applicable (a test for hardware no variant offers, test_utils/upstream_decorators.py): a
test marked NOT_APPLICABLE_MARK (or with the stash key NOT_APPLICABLE) and skipped at setup with
a reason starting NOT_APPLICABLE_PREFIX is accepted and carries the JUnit property
NOT_APPLICABLE_PROPERTY; no other skip is.
"""

import inspect
import pathlib
import unittest

import pytest

from test_utils import expectations

NOT_APPLICABLE_MARK = "torch_test_not_applicable"
NOT_APPLICABLE = pytest.StashKey[str]()
NOT_APPLICABLE_PREFIX = "not applicable to this hardware table: "
NOT_APPLICABLE_PROPERTY = "torch_test.not_applicable"


class OutcomeAudit:
    def __init__(self, variant: str, variant_of, entries: list[expectations.Entry], source: str):
        """`variant_of(item)`: the variant the item belongs to (after the plugin's selection)."""
        self.variant, self.variant_of = variant, variant_of
        self.entries, self.source = entries, source
        self.items: dict[str, pytest.Item] = {}
        self.declared: dict[str, expectations.Entry] = {}
        self.modules = []
        self.coroutines: set[str] = set()
        self.imperative_xfail: set[str] = set()
        self.ran = 0
        self.skipped: list[tuple[str, str]] = []
        self.xpassed: list[tuple[str, str]] = []
        self.stale: list[str] = []
        self.unrun: list[str] = []  # defined by the module, never run
        self.accepted: list[str] = []  # declared or not applicable: shown, not failing

    # Collection.

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector):
        report = yield
        if isinstance(collector, pytest.Module) and report.passed:
            self.modules.append(collector.obj)
        return report

    def pytest_warning_recorded(self, warning_message, when, nodeid, location):
        if when == "collect" and issubclass(
            warning_message.category, pytest.PytestCollectionWarning
        ):
            where = nodeid or (f"{location[0]}:{location[1]}" if location else "collection")
            self.unrun.append(f"{where}: {warning_message.message}")

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, config, items):
        collected = list(items)  # before any selection: variant, -k, shard
        yield
        self.unrun += _uncollected_test_cases(self.modules, collected, _classes_asked(config))
        ours = [i.nodeid for i in collected if self.variant_of(i) == self.variant]
        try:
            self.declared, unmatched = expectations.assign(self.entries, ours)
        except expectations.ExpectationError as error:
            raise pytest.UsageError(f"{self.source}: {error}") from error
        self.stale += [f"{e}: matches no test of variant {self.variant!r}" for e in unmatched]
        for item in items:
            self.items[item.nodeid] = item
            entry = self.declared.get(item.nodeid)
            if entry:
                item.user_properties.append((expectations.DECLARED_PROPERTY, entry.property_value))
            if _coroutine_in_plain_test_case(item):
                self.coroutines.add(item.nodeid)

    # Running.

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        if item.nodeid in self.coroutines:
            pytest.fail(
                f"{item.nodeid} is a coroutine (async def) in a plain unittest.TestCase, which "
                "calls it and never awaits it: derive the class from "
                "unittest.IsolatedAsyncioTestCase, or make the test synchronous",
                pytrace=False,
            )

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield  # outermost: pytest's xfail handling has already run
        if _xfail_called_in_body(item, call):
            self.imperative_xfail.add(item.nodeid)
        entry = self.declared.get(item.nodeid)
        if (
            entry
            and entry.outcome == "fail"
            and call.when == "call"
            and report.failed
            and entry.matches_text(report.longreprtext)
        ):
            report.outcome = "skipped"  # pytest's (and JUnit's) form of an expected failure
            report.wasxfail = f"declared: {entry.reason}"
        why = _not_applicable(item) if call.when == "setup" else None
        if why is not None and (NOT_APPLICABLE_PROPERTY, why) not in item.user_properties:
            item.user_properties.append((NOT_APPLICABLE_PROPERTY, why))
        return report

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
        if why is not None and report.when == "setup" and reason.startswith(NOT_APPLICABLE_PREFIX):
            self.accepted.append(f"{nodeid}: {reason}")
        elif entry and entry.outcome == "skip" and entry.matches_text(reason):
            self.accepted.append(f"{nodeid}: declared skip ({entry.reason})")
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
        if entry.outcome == "skip":
            self.stale.append(f"{nodeid}: declared skip ({entry.reason}), but it ran ({entry})")
        elif xfail == f"declared: {entry.reason}":
            self.accepted.append(f"{nodeid}: declared fail ({entry.reason})")
        elif report.passed:
            self.stale.append(f"{nodeid}: declared fail ({entry.reason}), but it passed ({entry})")
        elif report.failed:
            self.stale.append(
                f"{nodeid}: declared fail, but its failure does not match {entry.match!r} ({entry})"
            )

    # Verdict.

    def pytest_sessionfinish(self, session, exitstatus):
        failing = self.skipped or self.xpassed or self.stale or self.unrun
        if failing and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        write = terminalreporter
        if self.accepted:
            write.section("declared and not-applicable outcomes (accepted)")
            for line in self.accepted:
                write.line(line)
        if self.unrun:
            write.section(
                "tests the module defines but pytest never runs fail this target", red=True
            )
            for line in self.unrun:
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


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _not_applicable(item) -> str | None:
    """Why the test is not applicable to the hardware table, or None."""
    if NOT_APPLICABLE in item.stash:
        return item.stash[NOT_APPLICABLE]
    marker = item.get_closest_marker(NOT_APPLICABLE_MARK)
    if marker is None:
        return None
    return str(marker.kwargs.get("reason", marker.args[0] if marker.args else ""))


def _xfail_called_in_body(item, call) -> bool:
    """pytest.xfail() raised by the test body (unittest's expectedFailure raises it too)."""
    if call.when != "call" or call.excinfo is None:
        return False
    if not call.excinfo.errisinstance(pytest.xfail.Exception):
        return False
    expecting = (getattr(item, "obj", None), getattr(item, "cls", None))
    return not any(getattr(o, "__unittest_expecting_failure__", False) for o in expecting)


def _coroutine_in_plain_test_case(item) -> bool:
    cls = getattr(item, "cls", None)
    if cls is None or not issubclass(cls, unittest.TestCase):
        return False  # a bare async test function fails in pytest itself (no async plugin)
    if issubclass(cls, unittest.IsolatedAsyncioTestCase):
        return False
    return inspect.iscoroutinefunction(getattr(cls, getattr(item, "originalname", item.name), None))


def _classes_asked(config):
    """asked(module): None where the command line names the module's file (or a folder above
    it), so every class must yield tests; else the class names its node ids give
    (`test_x.py::SomeClass::test_y` asks for SomeClass only)."""
    here = config.invocation_params.dir
    whole, named = [], {}
    for arg in config.args:
        path, _, inner = arg.partition("::")
        path = (here / path).resolve()
        if inner:
            named.setdefault(path, set()).add(inner.split("::")[0].split("[")[0])
        else:
            whole.append(path)

    def asked(module) -> set[str] | None:
        file = pathlib.Path(module.__file__).resolve()
        if any(file == path or path in file.parents for path in whole):
            return None
        return named.get(file, set())

    return asked


def _uncollected_test_cases(modules, items, asked) -> list[str]:
    """TestCase classes of the modules with test methods but no collected test, of those the
    command line asked pytest to collect (`asked`, from _classes_asked)."""
    have_items = {getattr(i, "cls", None) for i in items}
    loader = unittest.TestLoader()
    found = []
    for module in modules:
        classes = asked(module)
        for name, obj in vars(module).items():
            if not (isinstance(obj, type) and issubclass(obj, unittest.TestCase)):
                continue
            if classes is not None and name not in classes:
                continue
            tests = loader.getTestCaseNames(obj)
            if not tests or obj in have_items or vars(obj).get("__test__", True) is False:
                continue
            hider = next((b for b in obj.__mro__ if vars(b).get("__test__", True) is False), None)
            why = (
                f"it inherits __test__ = False from {hider.__name__}" if hider else "not collected"
            )
            found.append(
                f"{module.__name__}.{name}: a unittest.TestCase with tests ({', '.join(tests[:3])}"
                f"{', ...' if len(tests) > 3 else ''}) that pytest does not collect: {why}. Set "
                f"__test__ = True in {name} to run them, or __test__ = False in its own body to "
                "declare it abstract"
            )
    return found
