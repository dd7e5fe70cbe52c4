"""Writes the BuildGrid server configuration of the loopback rig (tools/remote/rig.sh).

One instance with Execution + Bots, CAS, ByteStream and ActionCache; the scheduler state lives
in PostgreSQL, the action cache in Redis (append-only file: results outlive a server restart).
Every call carries a JWT signed with the rig's secret (rig_auth.py writes secret, tokens and
the ACL): only the `ci` token may UpdateActionResult; `dev` (developers, pool clients) reads and
executes; `worker` runs the bots. Pools come from tools/build_defs/pools.bzl: a static
property set has one label per pool and makes the pool key exclusive, so a GPU-pool worker never
takes CPU work. Actions without a pool property fall into the first label (the cpu pool).

Settings that matter on a small (2-core) host, found the hard way (README.md, "Cold uploads"):
  * thread-pool-size = maximum-concurrent-rpcs: every running remote action holds one Execute
    stream and every idle worker one long-polling UpdateBotSession; the default (5 x cores = 10)
    lets Bazel's streams starve the workers. Concurrent RPCs never exceed the thread pool
    (BuildGrid warns that queued RPCs can starve the Bots service); calls above it are refused
    with RESOURCE_EXHAUSTED, which Bazel retries.
  * grpc.server.max_pending_requests(_hard_limit): gRPC core queues calls until the Python server
    asks for them, at the pace of its one serving thread. On a cold CAS Bazel starts thousands
    of ByteStream.Writes at once; beyond this queue's bound gRPC core cancels them (CANCELLED
    "CANCELLED"), Bazel's retries meet the same flood, and the action fails with exit 34. A
    queue that holds Bazel's whole burst lets the calls wait instead.
  * grpc.server_max_unrequested_time_in_server: how long a call may wait in that queue (default
    30 s) before it is cancelled; a slow 2-core host drains a burst of 10,000 slower than that.
  * operation-stream-keepalive-timeout: how long an Execute stream waits for a change before it
    re-reads the job. Changes arrive through PostgreSQL notifications; the ones lost while the
    database restarts were otherwise noticed only after the default 600 s.
  * long-poll-during-execution: false (the !bots service; 0.9.1's schema refuses the option
    on !execution, whose docs name it): a bot that runs an action gets its
    UpdateBotSession answered at once. With BuildGrid's default a bot with spare capacity is
    held in a long poll (24 s here) and cannot report an action that finishes meanwhile: a 5 s
    test took 29 s. The worker polls every few seconds while busy instead (worker/bots.py).
  * bot-session-keepalive-timeout: a bot silent this long is dead (its jobs are requeued, and
    pool_watchdog.py counts its pool dead). It must outlast an idle bot's poll (24 s) plus
    BuildGrid's 30 s refusal of database work after a database outage, when no bot can renew
    its session; else bots expire during an outage and their running jobs run again.
  * queue-timeout-job-max-age: an action no bot takes within QUEUE_TIMEOUT_MIN fails with
    UNAVAILABLE (Bazel retries it as a new job) instead of waiting forever. A pool with no live
    worker is reported long before, by pool_watchdog.py.

Usage: python3 -m tools.remote.buildgrid_config --port 8980 --state /tmp/rig --pg-socket /tmp/rig/pg
"""

import argparse
import json
import pathlib

from tools.remote import rig_settings
from tools.remote.pools import read_pools

# A gRPC thread per concurrent RPC, >= 100 x Bazel's --remote_max_connections (.bazelrc: 1)
# + --jobs (32) Execute streams + the workers' calls; see the module docstring.
DEFAULT_THREADS = 200

# gRPC core server args (see the module docstring): hold Bazel's largest burst, 100 connections
# x 100 calls, for as long as Bazel's --remote_timeout.
# Seconds an Execute stream waits for a job change before it looks again (see the docstring).
STREAM_KEEPALIVE_S = 5
# Seconds after a bot's last call that BuildGrid counts it dead (see the docstring).
BOT_KEEPALIVE_S = 60
# Minutes an action may wait for a bot of its pool.
QUEUE_TIMEOUT_MIN = 30

QUEUE_OPTIONS = {
    "grpc.server.max_pending_requests": 20000,
    "grpc.server.max_pending_requests_hard_limit": 20000,
    "grpc.server_max_unrequested_time_in_server": 600,
}


def render(
    *,
    port: int,
    instance: str,
    cas_dir: pathlib.Path,
    pg_socket_dir: pathlib.Path,
    threads: int,
    grpc_options: dict[str, str] | None = None,
    queue_options: bool = True,
    redis_port: int,
    extra_pools: tuple[str, ...] = (),
) -> str:
    auth_dir = cas_dir.parent / "auth"
    key, pools = read_pools()
    q = json.dumps  # YAML accepts JSON strings; quoting keeps paths and names literal
    # BuildGrid refuses work for a pool its property set lacks; a GPU host's workers serve the
    # table's pools under the host's model (tools/remote/gpu_host/host_pools.py).
    served = set(pools.values()) | set(extra_pools)
    labels = "\n".join(
        f"          - {{label: {q(pool)}, properties: [[{q(key)}, {q(pool)}]]}}"
        # The cpu pool first: actions that name no pool are matched to the first label.
        for pool in sorted(served, key=lambda p: (p != pools.get("cpu"), p))
    )
    all_options = {**(QUEUE_OPTIONS if queue_options else {}), **(grpc_options or {})}
    options = "".join(f"\n  {k}: {v}" for k, v in all_options.items())
    return f"""# Generated by tools/remote/buildgrid_config.py for the loopback rig. Do not edit.
server:
  - !channel
    address: {q(f"127.0.0.1:{port}")}
    insecure-mode: true

authorization:
  method: jwt
  secret: {q(str(auth_dir / "secret"))}
  algorithm: hs256
  acl-config: {q(str(auth_dir / "acl.yml"))}

monitoring:
  enabled: false

grpc-server-options:
  grpc.so_reuseport: 0{options}

thread-pool-size: {threads}
maximum-concurrent-rpcs: {threads}

connections:
  - !sql-connection &sql
    connection-string: {q(f"postgresql+psycopg://bgd@/bgd?host={pg_socket_dir}")}
    pool-size: 10
    max-overflow: 20
  - !redis-connection &redis
    host: 127.0.0.1
    port: {redis_port}
    password: !read-file {q(str(auth_dir / "redis"))}

storages:
  - !disk-storage &cas
    path: {q(str(cas_dir))}

caches:
  - !redis-action-cache &action-cache
    storage: *cas
    redis: *redis
    allow-updates: true
    cache-failed-actions: false

schedulers:
  - !sql-scheduler &scheduler
    sql: *sql
    storage: *cas
    action-cache: *action-cache
    bot-session-keepalive-timeout: {BOT_KEEPALIVE_S}
    max-execution-timeout: 7200
    queue-timeout-job-max-age: {{minutes: {QUEUE_TIMEOUT_MIN}}}
    queue-timeout-period: {{minutes: 1}}
    assigners:
      - !priority-age-assigner
        count: 1
        interval: 0.2
    property-set:
      !static-property-set
        property-labels:
{labels}
        exclusive-property-keys: [{q(key)}]

instances:
  - name: {q(instance)}
    services:
      - !action-cache
        cache: *action-cache
      - !execution
        scheduler: *scheduler
        operation-stream-keepalive-timeout: {STREAM_KEEPALIVE_S}
        endpoints: [execution, operations]
      - !bots
        scheduler: *scheduler
        long-poll-during-execution: false
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--redis-port", type=int, required=True, help="the action cache's store")
    parser.add_argument("--instance", default=rig_settings.INSTANCE)
    parser.add_argument("--state", type=pathlib.Path, required=True, help="rig directory")
    parser.add_argument("--pg-socket", type=pathlib.Path, required=True)
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument(
        "--grpc-server-option", action="append", default=[], help="KEY=VALUE (a gRPC core arg)"
    )
    parser.add_argument(
        "--pool", action="append", default=[], help="a pool besides the table's (repeatable)"
    )
    parser.add_argument(
        "--grpc-default-queue",
        action="store_true",
        help="keep gRPC's default pending-call queue (reproduces the cold-upload CANCELLED)",
    )
    args = parser.parse_args()
    print(
        render(
            port=args.port,
            redis_port=args.redis_port,
            instance=args.instance,
            cas_dir=args.state / "cas",
            pg_socket_dir=args.pg_socket,
            threads=args.threads,
            grpc_options=dict(o.split("=", 1) for o in args.grpc_server_option),
            queue_options=not args.grpc_default_queue,
            extra_pools=tuple(args.pool),
        ),
        end="",
    )


if __name__ == "__main__":
    main()
