"""The witness: what each test body, and each rank's body, did, told straight to the runner.

pytest's reports, its summary, its exit status and its plugin registry can all be rewritten by
the code under test: a conftest's `pytest_pyfunc_call` that returns True without calling the
test, a `pytest_runtest_makereport` wrapper that turns a failure into a pass, a late
`session.exitstatus = 0`, `atexit.register(os._exit, 0)`, a unittest base class whose `run()`
returns early, a rank of torch's MultiProcessTestCase that exits 0 before its assertions. So
the runner does not take the verdict from pytest: it computes it (tools/runner/verdict.py) from
the source's inventory and from what this module saw, sent over a channel the runner owns.

The channel: a Unix datagram socket the runner binds before the test process starts
(tools/runner/witness.py); its address reaches this module in the runner's runtime record
(tools/hardware/spec.py). Each event is one datagram, sent as it happens, so it has reached the
runner however the process ends afterwards, and nothing the process does later can take it
back. No pytest hook, plugin or option is involved: the module wraps the functions that call a
test, before pytest starts:

  _pytest.runner.runtestprotocol   a case's protocol begins / ends       {"e": "begin"/"end"}
  _pytest.runner.CallInfo.from_call  what setup, call and teardown raised {"e": "phase"}
                                   (read where pytest catches it, before any report is made;
                                   for unittest cases, the exception unittest handed pytest)
  _pytest.python.Function.runtest  the test function itself, wrapped:    {"e": "enter"/"return"/
  unittest.TestCase._callTestMethod  the test method itself             "raise"}
  threading._make_invoke_excepthook  a thread's exception during a case  {"e": "thread"}
  warnings._warn_unawaited_coroutine a coroutine dropped unawaited       {"e": "unawaited"}
                                   (called by CPython itself, not through warning filters); one
                                   kept unawaited, found at the session's end by where it was
                                   made (`report_kept_coroutines`)
  unittest.TestCase.subTest,       each subtest's outcome: what its block  {"e": "sub"}
  pytest's subtests fixture        raised, or None (read as the block ends, before unittest or
                                   pytest catch it and make a report of their own)
  the runtest of any other item     a doctest's examples, a plugin's case {"e": "enter"/...}
  MultiProcessTestCase (torch's)   the ranks a case starts, and each      {"e": "ranks"/"rank"}
                                   rank's body entering / returning / raising

A body that returns anything but None fails where it returns (`reject`): a coroutine (an async
def behind a synchronous wrapper), a generator, a computed `return x == y`; so pytest's own
report shows it too, and no warning filter reaches it. A process started by a test reports its
ranks through tools/runner/process/descendants.py, which calls `install_descendant`. Without an
address (plain pytest outside the runner) nothing is installed.

Standard library only until pytest or torch is imported by the process itself.
"""

import contextlib
import functools
import inspect
import json
import os
import socket
import sys
import threading
import types
import unittest

from tools.hardware import spec
from tools.runner.process import events

_MAX_TEXT = 4000  # a message's characters kept: a datagram stays far below the socket's limit


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


class _State:
    channel: socket.socket | None = None
    case: dict | None = None  # the running case: {"path": ..., "name": ...}
    item = None  # its pytest item
    inner = 0  # > 0 while a case runs a pytest session of its own (pytest.main in a test)


_state = _State()


def exception(exc: BaseException) -> dict:
    """What the runner reads of an exception: its qualified type, the types it is an instance
    of, its message, and whether it is a skip or pytest.xfail()."""
    kind = type(exc)
    msg = getattr(exc, "msg", None) if _is_outcome(exc) else _doctest_text(exc)
    return {
        "type": type_name(kind),
        "mro": [type_name(k) for k in kind.__mro__ if k not in (object, BaseException)],
        "msg": str(msg if msg is not None else exc)[:_MAX_TEXT],
        "skip": _is_skip(exc),
        "xfail": _is_xfail(exc),
    }


def type_name(kind: type) -> str:
    """`torch._dynamo.exc.Unsupported`; builtins bare (`AssertionError`)."""
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _outcomes():
    """pytest's outcome exceptions, where pytest is loaded (their __module__ says "builtins")."""
    return sys.modules.get("_pytest.outcomes")


def _is_outcome(exc) -> bool:
    outcomes = _outcomes()
    return outcomes is not None and isinstance(exc, outcomes.OutcomeException)


def _is_skip(exc) -> bool:
    outcomes = _outcomes()
    kinds = (unittest.SkipTest,) + ((outcomes.Skipped,) if outcomes is not None else ())
    return isinstance(exc, kinds)


def _is_xfail(exc) -> bool:
    outcomes = _outcomes()
    return outcomes is not None and isinstance(exc, outcomes.XFailed)


def send(kind: str, **fields) -> None:
    """Sends one event of `kind` (tools/runner/process/events.py: its fields, exactly)."""
    channel = _state.channel
    if channel is None:
        return
    ev = events.event(kind, fields)
    ev["pid"] = os.getpid()
    ev.setdefault("case", _state.case)
    data = json.dumps(ev).encode()
    try:
        channel.send(data)
    except OSError:
        # The runner is gone (killed, or the test outlived it): nothing is left to tell.
        pass


def _connect(env) -> bool:
    address = spec.runtime(env).witness
    if not address:
        return False
    if _state.channel is None:
        channel = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # close-on-exec
        channel.connect(address)
        _state.channel = channel
    return True


def install_session(env=os.environ) -> None:
    """In the test process, before pytest starts: every case's protocol, phases and body, its
    threads and coroutines, and the ranks it starts, reported to the runner."""
    if not _connect(env):
        return
    import _pytest.python
    import _pytest.runner

    _wrap_protocol(_pytest.runner)
    _wrap_from_call(_pytest.runner.CallInfo)
    _wrap_function_runtest(_pytest.python.Function)
    check_returns()
    _watch_threads()
    _watch_coroutines()
    _watch_subtests()
    _watch_ranks(env)


def install_descendant(env=os.environ) -> None:
    """In a process a test started: the ranks of torch's MultiProcessTestCase report their
    bodies (a forked rank inherits the test process's patches and channel)."""
    if _connect(env):
        _watch_ranks(env)


def case_of(item) -> dict:
    """The case as the runner keys it: the source's path, and pytest's id within it."""
    return {"path": str(item.path), "name": item.nodeid.partition("::")[2]}


def _wrap_protocol(module) -> None:
    run = module.runtestprotocol

    @functools.wraps(run)
    def runtestprotocol(item, log=True, nextitem=None):
        if _state.case is not None:  # an inner session's case: the running case judges it
            _state.inner += 1
            try:
                return run(item, log=log, nextitem=nextitem)
            finally:
                _state.inner -= 1
        _state.case, _state.item = case_of(item), item
        send(events.BEGIN, nodeid=item.nodeid)
        _witness_item_runtest(item)
        try:
            # Through a frame named for the case: a coroutine made in any of its phases keeps
            # that name in its origin (report_kept_coroutines).
            case = _state.case
            through = _frame_named(f"{_CASE_FRAME}{case['path']}::{case['name']}")
            return through(lambda: run(item, log=log, nextitem=nextitem))
        finally:
            send(events.END)
            _state.case = _state.item = None

    module.runtestprotocol = runtestprotocol


def _wrap_from_call(call_info) -> None:
    from_call = call_info.from_call.__func__

    @functools.wraps(from_call)
    def wrapped(cls, func, when, reraise=None):
        call = from_call(cls, func, when, reraise)
        if _state.case is not None and not _state.inner and when in ("setup", "call", "teardown"):
            exc = call.excinfo.value if call.excinfo is not None else None
            if exc is None:
                exc = _unittest_excinfo(_state.item)
            send(events.PHASE, when=when, exc=exception(exc) if exc is not None else None)
        return call

    call_info.from_call = classmethod(wrapped)


def _wrap_function_runtest(function_cls) -> None:
    """The test function itself, entered, returning or raising: whatever a conftest's
    pytest_pyfunc_call does with it, only a real call of it is seen as the body."""
    runtest = function_cls.runtest

    @functools.wraps(runtest)
    def witnessed_runtest(self):
        original = self.obj
        if inspect.isasyncgenfunction(original):
            return runtest(self)  # pytest fails it itself; no body of it is ever seen
        self.obj = _body(original, self.nodeid)
        try:
            return runtest(self)
        finally:
            self.obj = original

    function_cls.runtest = witnessed_runtest


def _unittest_excinfo(item):
    """unittest cases (pytest's TestCaseFunction) keep what unittest hands them (a failure, a
    skip) in `_excinfo`, read by pytest only when it makes the report: read where the phase
    ends, before any report hook."""
    stored = getattr(item, "_excinfo", None)
    return stored[0].value if stored else None


def _body(fn, what: str):
    """The test function, witnessed. An async def stays one, witnessed where it is awaited: an
    async runner (a conftest's pytest_pyfunc_call) that awaits it sees its body run; one that
    drops it leaves a coroutine never awaited, and pytest's own call fails it as before."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_body(*args, **kwargs):
            with _Body(what) as body:
                body.returned(await fn(*args, **kwargs))

        return async_body

    @functools.wraps(fn)
    def body(*args, **kwargs):
        _witnessed_call(lambda: fn(*args, **kwargs), what)

    return body


def _witnessed_call(call, what: str, own: bool = True) -> None:
    """Runs a test body, `call()`, telling the witness (where it is the running case's `own`)
    that it entered and then returned or raised; a body that returns anything but None fails
    (`reject`)."""
    with _Body(what, own) as body:
        body.returned(call())


def _own_test(test: unittest.TestCase) -> bool:
    """Whether `test` is the running case's own TestCase (pytest's item of it). An inner suite
    that a test, a fixture or a setUp runs (unittest's runner on a TestCase of its own, whose
    failure it asserts) is judged by what runs it: its bodies and subtests tell nothing, in
    any thread or a process forked meanwhile. Outside a case (a rank's process) each is."""
    item = _state.item
    return item is None or getattr(item, "instance", None) is test


class _Body:
    """A test body while it runs: tells the witness it entered, then returned or raised."""

    def __init__(self, what: str, own: bool = True):
        # An inner pytest session's bodies (pytest.main in a test) are its test's to judge.
        self.what, self.own = what, own and not _state.inner

    def __enter__(self):
        if self.own:
            send(events.ENTER)
        return self

    def returned(self, result) -> None:
        if result is not None:
            reject(result, self.what)

    def __exit__(self, kind, exc, traceback) -> bool:
        if self.own:
            if exc is None:
                send(events.RETURN)
            else:
                send(events.RAISE, exc=exception(exc))
        return False  # an exception goes on


def check_returns() -> None:
    """unittest's own call of a test method fails a non-None return and tells the witness
    (where one listens) of the body: in the test process, and in processes that run test
    methods outside pytest (test_utils' ranks)."""

    def _call_test_method(self, method):
        _witnessed_call(method, self.id(), _own_test(self))

    def _call_async_test_method(self, method):
        # Awaits a coroutine in the case's own loop.
        _witnessed_call(lambda: self._callMaybeAsync(method), self.id(), _own_test(self))

    unittest.TestCase._callTestMethod = _call_test_method
    unittest.IsolatedAsyncioTestCase._callTestMethod = _call_async_test_method


def _watch_threads() -> None:
    """Every thread started from now on reports the exception it dies of. Not through
    threading.excepthook, which pytest (and any test) sets anew: through the hook each thread
    makes for itself when it is created (CPython's threading._make_invoke_excepthook)."""
    make = threading._make_invoke_excepthook

    def make_witnessed():
        invoke = make()

        def invoke_excepthook(thread):
            exc = sys.exc_info()[1]
            if exc is not None and not isinstance(exc, SystemExit):
                send(events.THREAD, thread=getattr(thread, "name", "a thread"), exc=exception(exc))
            invoke(thread)

        return invoke_excepthook

    threading._make_invoke_excepthook = make_witnessed


def _watch_coroutines() -> None:
    import warnings

    warn = warnings._warn_unawaited_coroutine

    def unawaited(coro):
        send(events.UNAWAITED, what=getattr(coro, "__qualname__", repr(coro)))
        warn(coro)

    warnings._warn_unawaited_coroutine = unawaited
    # A coroutine that something keeps (a recording decorator's list) is never finalized, so
    # CPython never warns of it: each keeps where it was made, for report_kept_coroutines.
    sys.set_coroutine_origin_tracking_depth(_ORIGIN_DEPTH)


# Frames a coroutine keeps of where it was made: enough to reach pytest's protocol of the case
# that made it, past pytest's and pluggy's frames.
_ORIGIN_DEPTH = 64
_CASE_FRAME = "torch_test_case_"


def _through(call):
    return call()


def _frame_named(name: str):
    """`_through`, its frame named `name`."""
    code = _through.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, globals())


def _case_of_frame(name: str) -> dict | None:
    """The case whose protocol a frame of this name ran, or None."""
    if not name.startswith(_CASE_FRAME):
        return None
    path, _, case = name[len(_CASE_FRAME) :].partition("::")
    return {"path": path, "name": case}


def report_kept_coroutines() -> None:
    """At the session's end, in the test process: every coroutine a test made that never
    started and is still referenced (never finalized, so CPython never warned) fails that
    test, as one dropped unawaited does. A coroutine no test's frame made is not a test's."""
    if _state.channel is None:
        return
    import gc

    coroutine = types.CoroutineType
    for obj in gc.get_objects():
        # type(), not isinstance(): a dead weak proxy raises on any other look at it.
        if type(obj) is not coroutine or not obj.cr_origin:
            continue
        if inspect.getcoroutinestate(obj) != inspect.CORO_CREATED:
            continue
        cases = (_case_of_frame(name) for _, _, name in obj.cr_origin)
        case = next((c for c in cases if c is not None), None)
        if case is not None:
            file, line, _ = obj.cr_origin[0]
            where = f"made at {os.path.basename(file)}:{line}, kept and never awaited"
            send(events.UNAWAITED, case=case, what=f"{obj.__qualname__} ({where})")


def sub_description(msg, params: dict) -> str:
    """A subtest's name under its case, as pytest's report writes it: `[msg] (k=v, ...)`."""
    parts = [f"[{msg}]"] if msg is not None else []
    if params:
        parts.append("(" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")")
    return " ".join(parts) or "(<subtest>)"


def _watch_subtests() -> None:
    """Each subtest's outcome. unittest's subTest and pytest's subtests fixture catch what the
    block raises and make reports of their own, so the case's body returns however its
    subtests ended: read here, where the block ends, before either catches it."""
    from unittest import case as unittest_case

    sentinel = unittest_case._subtest_msg_sentinel
    sub_test = unittest.TestCase.subTest

    @functools.wraps(sub_test)
    @contextlib.contextmanager
    def witnessed_sub_test(self, msg=sentinel, **params):
        with sub_test(self, msg, **params):
            outcome = None if _state.inner else self._outcome  # an inner session's: not ours
            supported = outcome is not None and outcome.result_supports_subtests
            if _state.case is None or not supported or not _own_test(self):
                # No subtest of the case's (a result without subTest support: failures are
                # the body's; an inner suite's or session's: its runner's).
                yield
                return
            sub = self._subtest
            text = None if sub._message is sentinel else sub._message
            desc = sub_description(text, dict(sub.params))
            try:
                yield
            except BaseException as exc:
                send(events.SUB, desc=desc, exc=exception(exc))
                raise
            if outcome.success:  # not where a nested subtest failed: unittest reports no pass
                send(events.SUB, desc=desc, exc=None)

    unittest.TestCase.subTest = witnessed_sub_test
    try:
        from _pytest import subtests
    except ImportError:  # a pytest without built-in subtests
        return
    manager = subtests._SubTestContextManager
    exit_block = manager.__exit__

    @functools.wraps(exit_block)
    def witnessed_exit(self, exc_type, exc_val, exc_tb):
        if _state.case is not None and not _state.inner:
            exc = exception(exc_val) if exc_val is not None else None
            send(events.SUB, desc=sub_description(self.msg, self.kwargs), exc=exc)
        return exit_block(self, exc_type, exc_val, exc_tb)

    manager.__exit__ = witnessed_exit


def _witness_item_runtest(item) -> None:
    """An item that is no test function (a doctest, a plugin's own kind of case): its
    `runtest` is its body, entered, returned or raised, as a function's."""
    from _pytest.python import Function

    if isinstance(item, Function) or "runtest" in vars(item):
        return  # a function's body is its test function (_wrap_function_runtest)
    runtest = item.runtest
    item.runtest = lambda: _witnessed_call(runtest, item.nodeid)


def _doctest_text(exc) -> str | None:
    """What a failing doctest's examples did (doctest's DocTestFailure and UnexpectedException,
    and pytest's MultipleDoctestFailures, say nothing of it in their str), or None for any
    other exception."""
    import doctest

    if isinstance(exc, (doctest.DocTestFailure, doctest.UnexpectedException)):
        failures = [exc]
    elif type(exc).__name__ == "MultipleDoctestFailures":
        failures = list(getattr(exc, "failures", []))
    else:
        return None
    said = []
    for failure in failures:
        example = failure.example
        line = (failure.test.lineno or 0) + example.lineno + 1
        where = f"line {line}: {example.source.strip()}"
        if isinstance(failure, doctest.UnexpectedException):
            raised = failure.exc_info[1]
            said.append(f"{where}: raised {type_name(type(raised))}: {raised}")
        else:
            said.append(f"{where}: expected {example.want.strip()!r}, got {failure.got.strip()!r}")
    return "; ".join(said)


def _watch_ranks(env) -> None:
    from tools.runner.process import on_import

    on_import.when_imported("torch.testing._internal.common_distributed", _wrap_ranks)


def _wrap_ranks(module) -> None:
    """torch's MultiProcessTestCase: the test process says how many ranks a case starts; each
    rank says whether its body returned. A rank that exits 0 before its assertions leaves no
    return, whatever the test process then makes of its exit code."""
    cls = module.MultiProcessTestCase
    if getattr(cls, "__torch_test_witnessed__", False):
        return
    join_or_run = cls.join_or_run

    @functools.wraps(join_or_run)
    def witnessed_join_or_run(self, fn):
        @functools.wraps(fn)
        def rank_body(*args, **kwargs):
            rank = int(self.rank)
            send(events.RANK, id=self.id(), rank=rank, what="enter")
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                send(events.RANK, id=self.id(), rank=rank, what="raise", exc=exception(exc))
                raise
            send(events.RANK, id=self.id(), rank=rank, what="return")
            return result

        joined = join_or_run(self, rank_body)

        @functools.wraps(joined)
        def main_or_rank(*args, **kwargs):
            if int(self.rank) == cls.MAIN_PROCESS_RANK:
                send(events.RANKS, id=self.id(), world=int(self.world_size))
            return joined(*args, **kwargs)

        return main_or_rank

    cls.join_or_run = witnessed_join_or_run
    cls.__torch_test_witnessed__ = True
