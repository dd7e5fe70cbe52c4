"""The witness's events: one schema for their senders and their readers.

Senders: tools/runner/process/witness.py (what each case, body, subtest, thread, coroutine and
rank did) and tools/runner/session/plugin.py (that the runner's plugin configured pytest and
placed the tests). Readers: tools/runner/verdict.py (the cases' outcomes) and
tools/runner/pytest_runner.py (the plugin's events). Each event is a JSON object:
{"e": KIND, "pid": ..., "case": {"path", "name"} or None, FIELD: ...}, with exactly the fields
its kind lists below. A kind renamed on one side only fails loudly on both: `event` refuses to
make one it does not know, and `check` names it to the verdict, which fails the target.

Standard library only: the test process imports it before pytest or torch.
"""

BEGIN, END, PHASE = "begin", "end", "phase"
ENTER, RETURN, RAISE = "enter", "return", "raise"
THREAD, UNAWAITED, SUB = "thread", "unawaited", "sub"
RANKS, RANK, PLUGIN = "ranks", "rank", "plugin"

# kind -> its fields (besides "e", "pid", "case")
FIELDS: dict[str, tuple[str, ...]] = {
    BEGIN: ("nodeid",),  # a case's protocol began, pytest's id of it
    END: (),  # ... and ended
    PHASE: ("when", "exc"),  # setup / call / teardown ended, with what it raised (or None)
    ENTER: (),  # the case's body was entered
    RETURN: (),  # ... returned
    RAISE: ("exc",),  # ... raised
    THREAD: ("thread", "exc"),  # a thread died of an exception
    UNAWAITED: ("what",),  # a coroutine never awaited (dropped, or kept)
    SUB: ("desc", "exc"),  # a subtest ended, with what it raised (or None)
    RANKS: ("id", "world"),  # a case started torch's MultiProcessTestCase ranks
    RANK: ("id", "rank", "what"),  # a rank's body: "enter", "return" or "raise" (+ "exc")
    PLUGIN: ("what",),  # the runner's plugin: "configured", "placed"
}
_OPTIONAL = {RANK: ("exc",)}
COMMON = ("e", "pid", "case")


class UnknownEvent(ValueError):
    """An event of a kind, or with fields, this schema does not define."""


def event(kind: str, fields: dict) -> dict:
    """The event to send: `fields` under `kind`; raises UnknownEvent where they do not fit."""
    if kind not in FIELDS:
        raise UnknownEvent(f"the witness has no event {kind!r} (tools/runner/process/events.py)")
    problem = _fields_problem(kind, set(fields) - {"case"})
    if problem:
        raise UnknownEvent(problem)
    return {"e": kind, **fields}


def check(ev) -> str | None:
    """Why a received event does not fit the schema, or None."""
    if not isinstance(ev, dict):
        return f"an event that is no object: {ev!r:.200}"
    kind = ev.get("e")
    if kind not in FIELDS:
        return f"an event of unknown kind {kind!r} (tools/runner/process/events.py)"
    return _fields_problem(kind, set(ev) - set(COMMON))


def _fields_problem(kind: str, have: set) -> str | None:
    need = set(FIELDS[kind])
    allowed = need | set(_OPTIONAL.get(kind, ()))
    if need <= have <= allowed:
        return None
    missing, extra = sorted(need - have), sorted(have - allowed)
    return f"event {kind!r}: missing {missing}, unknown {extra} (tools/runner/process/events.py)"
