"""The worker's bot session on the Remote Workers API (google.devtools.remoteworkers.v1test2).

CreateBotSession announces the worker's platform properties (its pool); UpdateBotSession
long-polls for leases while idle, and while actions run it acknowledges them, reports finished
ones (lease COMPLETED with the ActionResult) and picks up new ones up to `capacity`. A lease
the server drops (cancelled) is killed here.

A finished lease stays in the session, COMPLETED, until an UpdateBotSession carrying it
succeeds: while BuildGrid cannot reach its database (it answers UNAVAILABLE, for 30 s after a
connection error in 0.9.1) the same session is sent again every second, so the result is
reported once the database is back and the job is not run again. Only a session the server no
longer knows is replaced; actions still running then are killed (their leases go back to the
queue with the old session).
"""

import concurrent.futures
import json
import logging
import pathlib
import time

import grpc
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb2
from buildgrid._protos.google.devtools.remoteworkers.v1test2 import bots_pb2
from buildgrid._protos.google.devtools.remoteworkers.v1test2.bots_pb2_grpc import BotsStub
from buildgrid._protos.google.rpc import code_pb2, status_pb2
from buildgrid.server.client.cas import Downloader

from tools.remote.worker.action import Execution, FileCache, Outcome

# The server holds an idle long poll for 80% of this, and expects to hear from a bot well within
# its bot-session-keepalive-timeout (60 s in the rig's config).
LONG_POLL_S = 30
# While actions run: how often to poll (finished actions are reported at once). BuildGrid answers
# a busy bot at once (long-poll-during-execution: false), so this also bounds how long a
# free slot waits for work.
BUSY_POLL_S = 2
# Below BuildGrid's 3 s network allowance (x 0.8) CreateBotSession returns without waiting for
# work, so the session is open (and logged) at once.
CREATE_TIMEOUT_S = 3

log = logging.getLogger("worker")

# The server no longer knows the session (BuildGrid: INVALID_ARGUMENT "Bot does not exist",
# a session mismatch or a closed session). Any other error, e.g. UNAVAILABLE while the database
# is down, INTERNAL from a failed query or DEADLINE_EXCEEDED, keeps the session and retries.
_SESSION_GONE = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
RETRY_S = 1


class Bot:
    def __init__(
        self,
        channel: grpc.Channel,
        instance: str,
        name: str,
        properties: list[tuple[str, str]],
        capacity: int,
        work_root: pathlib.Path,
        sandbox_args: list[str] = (),
    ):
        self._channel = channel
        self._bots = BotsStub(channel)
        self._downloader = Downloader(channel, instance)  # actions sent by digest
        self._cache = FileCache(work_root / "cache")
        self._work_root = work_root / "actions"
        self._work_root.mkdir(parents=True, exist_ok=True)
        self._instance = instance
        self._name = name
        self._properties = properties
        self._capacity = capacity
        self._sandbox_args = list(sandbox_args)  # extra bwrap arguments of every action
        self._pool = concurrent.futures.ThreadPoolExecutor(capacity, thread_name_prefix="action")
        # lease id -> (execution, future of its Outcome)
        self._running: dict[str, tuple[Execution, concurrent.futures.Future]] = {}

    def _new_session(self) -> bots_pb2.BotSession:
        session = bots_pb2.BotSession(bot_id=self._name, status=bots_pb2.OK)
        device = session.worker.devices.add(handle=self._name)  # the primary device: this host
        for key, value in self._properties:
            device.properties.add(key=key, value=value)
        session.worker.configs.add(key="capacity", value=str(self._capacity))
        return session

    def serve_forever(self) -> None:
        while True:
            session = self._open_session()
            try:
                while True:
                    session = self._step(session)
            except grpc.RpcError as error:
                # E.g. the server reaped the session after a stall: start over, never exit.
                log.warning("session lost (%s: %s); opening another", error.code(), error.details())
                for execution, _ in self._running.values():
                    execution.cancel()
                self._running.clear()
                time.sleep(RETRY_S)

    def _open_session(self) -> bots_pb2.BotSession:
        request = bots_pb2.CreateBotSessionRequest(
            parent=self._instance, bot_session=self._new_session()
        )
        while True:  # never exit: a worker that gave up would leave its pool dead
            try:
                session = self._bots.CreateBotSession(request, timeout=CREATE_TIMEOUT_S)
                break
            except grpc.RpcError as error:
                log.info("server not ready (%s: %s); retrying", error.code(), error.details())
                time.sleep(RETRY_S)
        log.info("session %s properties %s", session.name, self._properties)
        return session

    def _step(self, session: bots_pb2.BotSession) -> bots_pb2.BotSession:
        self._start_new_leases(session)
        if self._running:
            running = [future for _, future in self._running.values()]
            concurrent.futures.wait(
                running, timeout=BUSY_POLL_S, return_when=concurrent.futures.FIRST_COMPLETED
            )
        self._report_finished(session)
        request = bots_pb2.UpdateBotSessionRequest(name=session.name, bot_session=session)
        try:
            updated = self._bots.UpdateBotSession(request, timeout=LONG_POLL_S)
        except grpc.RpcError as error:
            if error.code() in _SESSION_GONE:
                raise
            if any(lease.state == bots_pb2.COMPLETED for lease in session.leases):
                log.info(
                    "report not accepted (%s: %s); sending it again", error.code(), error.details()
                )
            time.sleep(RETRY_S)
            return session  # finished leases stay COMPLETED in `session` and are sent again
        self._forget_reported(session, updated)
        self._cancel_dropped(updated)
        return updated

    def _start_new_leases(self, session: bots_pb2.BotSession) -> None:
        for lease in session.leases:
            if lease.state in (bots_pb2.PENDING, bots_pb2.ACTIVE) and lease.id not in self._running:
                action = self._action_of(lease)
                execution = Execution(
                    self._channel,
                    self._instance,
                    self._cache,
                    self._work_root,
                    self._name,
                    self._sandbox_args,
                )
                future = self._pool.submit(self._run, lease.id, execution, action)
                self._running[lease.id] = (execution, future)
                lease.state = bots_pb2.ACTIVE

    def _action_of(self, lease: bots_pb2.Lease) -> re_pb2.Action:
        action = re_pb2.Action()
        if lease.payload.Unpack(action):
            return action
        digest = re_pb2.Digest()
        lease.payload.Unpack(digest)
        return self._downloader.get_message(digest, action)

    def _run(self, lease_id: str, execution: Execution, action: re_pb2.Action) -> Outcome:
        started = time.monotonic()
        try:
            outcome = execution.run(action)
        except Exception as error:  # reported to Bazel as the action's failure, never swallowed
            log.exception("lease %s failed", lease_id)
            outcome = Outcome(
                result=re_pb2.ActionResult(),
                status=status_pb2.Status(code=code_pb2.INTERNAL, message=repr(error)[:1000]),
                summary={"error": repr(error)[:200]},
            )
        command = execution.command
        env = {v.name: v.value for v in command.environment_variables}
        record = {
            "worker": self._name,
            "pool": {p.name: p.value for p in action.platform.properties},
            "target": env.get("TEST_TARGET", "?"),
            "shard": env.get("TEST_SHARD_INDEX"),
            # test-setup.sh runs the test, generate-xml.sh writes test.xml for it afterwards
            "program": pathlib.PurePath(command.arguments[0]).name if command.arguments else "?",
            "lease": lease_id,
            "wall_s": round(time.monotonic() - started, 2),
            **{k: round(v, 2) if isinstance(v, float) else v for k, v in outcome.summary.items()},
        }
        log.info("executed %s", json.dumps(record, sort_keys=True))
        return outcome

    def _report_finished(self, session: bots_pb2.BotSession) -> None:
        for lease in session.leases:
            entry = self._running.get(lease.id)
            if entry and entry[1].done() and lease.state != bots_pb2.COMPLETED:
                outcome = entry[1].result()
                lease.state = bots_pb2.COMPLETED
                lease.status.CopyFrom(outcome.status)
                lease.result.Pack(outcome.result)

    def _forget_reported(self, sent: bots_pb2.BotSession, updated: bots_pb2.BotSession) -> None:
        for lease in sent.leases:
            if lease.state == bots_pb2.COMPLETED:
                self._running.pop(lease.id, None)

    def _cancel_dropped(self, updated: bots_pb2.BotSession) -> None:
        kept = {lease.id for lease in updated.leases}
        for lease_id in [i for i in self._running if i not in kept]:
            execution, future = self._running.pop(lease_id)
            if not future.done():
                log.info("lease %s cancelled by the server", lease_id)
                execution.cancel()
