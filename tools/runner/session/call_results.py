"""A test's call judged by what it did, not by how it is spelled.

A test body that never runs passes silently in three ways that pytest and unittest only warn
about, and a warning filter (`-W ignore`, `-p no:warnings`, PYTHONWARNINGS) hides the warning:
- the call returns a value instead of None: a coroutine (an `async def` behind any synchronous
  wrapper), a generator (a `yield` anywhere in the body), or a computed result (`return x == y`
  instead of asserting it);
- an assertion fails in a thread the test started (the thread dies, the test goes on).
So each call is checked where it happens: the value a test function, a unittest method (its
`_callTestMethod`) or torch's rank-side test method returns fails the test unless it is None,
and an exception a thread raises while a test runs fails that test. Neither goes through the
warnings machinery, so no filter reaches it.
"""

import functools
import inspect
import threading
import traceback
import unittest


class ReturnedValue(AssertionError):
    """A test returned something other than None: its body did not run, or did not assert."""


def reject(result, what: str) -> None:
    """Raises ReturnedValue for a test's non-None `result`, closing a coroutine or generator."""
    if inspect.iscoroutine(result) or inspect.isgenerator(result):
        result.close()  # never awaited / never iterated: its body did not run
        kind = "a coroutine" if inspect.iscoroutine(result) else "a generator"
        why = f"{kind}, so its body never ran (async def needs an async runner; remove yield)"
    else:
        why = f"{type(result).__name__} {result!r:.200}: assert it instead of returning it"
    raise ReturnedValue(f"{what} returned {why}")


def checked(fn, what: str | None = None):
    """`fn` that fails when it returns anything but None."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        result = fn(*args, **kwargs)
        if result is not None:
            reject(result, what or getattr(fn, "__qualname__", repr(fn)))

    return call


def _call_test_method(self, method):
    result = method()
    if result is not None:
        reject(result, self.id())


def _call_async_test_method(self, method):
    result = self._callMaybeAsync(method)  # awaits a coroutine in the case's own loop
    if result is not None:
        reject(result, self.id())


def install_unittest() -> None:
    """unittest's own call of a test method fails a non-None return (idempotent)."""
    unittest.TestCase._callTestMethod = _call_test_method
    unittest.IsolatedAsyncioTestCase._callTestMethod = _call_async_test_method


def plugin():
    """The pytest plugin: plain test functions' returns, and threads' exceptions, per test."""
    import pytest

    class CallResults:
        def __init__(self):
            self.thread_errors: list[str] = []

        def _record(self, args) -> None:
            name = getattr(args.thread, "name", "a thread")
            text = "".join(
                traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)
            )
            self.thread_errors.append(f"in {name}:\n{text}")

        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_runtest_protocol(self, item, nextitem):
            before = threading.excepthook  # pytest's own, set once per session: chained

            def hook(args):
                self._record(args)
                before(args)

            threading.excepthook = hook
            try:
                return (yield)
            finally:
                threading.excepthook = before

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_call(self, item):
            cls = getattr(item, "cls", None)
            if not isinstance(item, pytest.Function) or (
                cls is not None and issubclass(cls, unittest.TestCase)  # _callTestMethod's
            ):
                return
            fn = item.obj
            if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
                return  # pytest fails an async def test function itself
            item.obj = checked(fn, item.nodeid)

        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_makereport(self, item, call):
            report = yield
            if self.thread_errors:
                errors, self.thread_errors = self.thread_errors, []
                report.outcome = "failed"
                if hasattr(report, "wasxfail"):
                    del report.wasxfail  # no expected failure covers a thread's
                report.longrepr = (
                    f"{item.nodeid}: an exception was raised in a thread during {call.when} "
                    "(a thread's failure is its test's):\n" + "\n".join(errors)
                )
            return report

    return CallResults()
