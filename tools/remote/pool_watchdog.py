"""Fails the queued actions of a pool that has no live worker, with an error naming the pool.

Without it an action for a dead pool (every worker of it killed, or none started) waits in
BuildGrid's queue until `queue-timeout-job-max-age` (30 min in the rig), and Bazel shows only
"Testing ...; N s remote" meanwhile. BuildGrid 0.9.1 has no per-pool liveness check: its queue
timeout is one age for every queued job (a busy pool would trip it too), and it ends the job
with UNAVAILABLE, which Bazel retries as a new job. So this small loop, run by rig.sh next to
the server, does what BuildGrid lacks and nothing more:

  * a pool is alive while some bot session with its property label has not expired
    (BuildGrid expires a session `bot-session-keepalive-timeout` after the worker's last call);
  * a pool without one for --dead-after seconds (RIG_POOL_DEAD_AFTER_S, tools/remote/rig.conf)
    has its queued jobs completed through BuildGrid's own Scheduler._batch_timeout_jobs (the
    queue timeout's code path: ExecuteResponse stored in the CAS, job COMPLETED, Execute
    streams notified), with FAILED_PRECONDITION, the status the Remote Execution API names for
    "no worker available" and one Bazel reports, not retries.

Usage: python -m tools.remote.pool_watchdog --pg-socket DIR --cas DIR [--dead-after S]
(BuildGrid's venv; rig.sh starts it). Logs one line per failed batch.
"""

import argparse
import logging
import time
from datetime import UTC, datetime

from buildgrid._protos.google.rpc import code_pb2
from buildgrid.server.cas.storage.disk import DiskStorage
from buildgrid.server.enums import OperationStage
from buildgrid.server.scheduler.impl import Scheduler
from buildgrid.server.sql.models import BotEntry, JobEntry, PropertyLabelEntry
from buildgrid.server.sql.provider import SqlProvider
from sqlalchemy import select

from tools.remote import rig_settings

# A worker that restarts opens a new session within seconds; a pool without one this long is dead.
PERIOD_S = 2

log = logging.getLogger("pool_watchdog")


def _message(pool: str, dead_s: float) -> str:
    return (
        f"no live worker in pool '{pool}' for {dead_s:.0f} s: its workers are dead or missing "
        "(on the rig: tools/remote/rig.sh status)"
    )


class Watchdog:
    def __init__(self, scheduler: Scheduler, sql: SqlProvider, dead_after_s: float):
        self._scheduler = scheduler
        self._sql = sql
        self._dead_after_s = dead_after_s
        self._started = time.monotonic()
        self._last_alive: dict[str, float] = {}  # property label -> when a live bot was seen

    def _labels(self) -> tuple[set[str], set[str]]:
        """(labels of queued jobs, labels with an unexpired bot session)."""
        now = datetime.now(UTC).replace(tzinfo=None)  # BuildGrid stores naive UTC times
        with self._sql.session() as session:
            queued = session.execute(
                select(JobEntry.property_label)
                .where(JobEntry.stage == OperationStage.QUEUED.value)
                .distinct()
            ).scalars()
            alive = session.execute(
                select(PropertyLabelEntry.property_label)
                .join(BotEntry, BotEntry.name == PropertyLabelEntry.bot_name)
                .where(BotEntry.expiry_time > now)
                .distinct()
            ).scalars()
            return set(queued), set(alive)

    def check(self) -> None:
        queued, alive = self._labels()
        now = time.monotonic()
        for label in alive:
            self._last_alive[label] = now
        for label in queued - alive:
            dead_s = now - self._last_alive.get(label, self._started)
            if dead_s < self._dead_after_s:
                continue
            jobs = (
                select(JobEntry)
                .where(JobEntry.stage == OperationStage.QUEUED.value)
                .where(JobEntry.property_label == label)
                .with_for_update(skip_locked=True)
            )
            message = _message(label, dead_s)
            failed = self._scheduler._batch_timeout_jobs(
                jobs, code_pb2.FAILED_PRECONDITION, message
            )
            if failed:
                log.warning("failed %d queued job(s): %s", failed, message)

    def run_forever(self) -> None:
        while True:
            try:
                self.check()
            except Exception as error:  # e.g. the database restarting: look again next period
                log.info("check skipped: %s", error)
            time.sleep(PERIOD_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pg-socket", required=True, help="PostgreSQL's socket directory")
    parser.add_argument("--cas", required=True, help="BuildGrid's !disk-storage path")
    parser.add_argument(
        "--dead-after", type=float, default=rig_settings.POOL_DEAD_AFTER_S, help="seconds"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sql = SqlProvider(connection_string=f"postgresql+psycopg://bgd@/bgd?host={args.pg_socket}")
    # Only _batch_timeout_jobs is used: it needs the database, the CAS and nothing else.
    scheduler = Scheduler(sql, DiskStorage(args.cas), property_set=None)
    log.info("watching pools (dead after %.0f s without a live worker)", args.dead_after)
    Watchdog(scheduler, sql, args.dead_after).run_forever()


if __name__ == "__main__":
    main()
