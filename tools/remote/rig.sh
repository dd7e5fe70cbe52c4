#!/usr/bin/env bash
# A real remote-execution service on loopback, for trying and testing --config=remote:
# BuildGrid 0.9.1 (REAPI: Execution, CAS, ByteStream, ActionCache) with a private PostgreSQL
# cluster as its scheduler store, a private Redis as its action cache (survives a server
# restart), and one worker per kind of pool from tools/build_defs/pools.bzl: `cpu` (the cpu
# variant's pool) and `gpu` (every other pool; it has no GPU, it only proves routing). Every
# call needs a JWT: `up` generates the secret and tokens in $RIG_DIR/auth (rig_auth.py) and
# writes $RIG_DIR/auth.bazelrc (the developer token). Workers run as root, each action in a
# bubblewrap sandbox (worker/sandbox.py). A watchdog fails the queued actions of a pool with no
# live worker (pool_watchdog.py). Everything listens on 127.0.0.1 or a unix socket.
#
#   tools/remote/rig.sh up       start it all (installs BuildGrid into a venv on first use)
#   tools/remote/rig.sh down     stop everything `up` started and delete its state
#   tools/remote/rig.sh status   what runs, where the logs are
#   tools/remote/rig.sh restart buildgrid|postgres   stop and start one of them (state kept)
#
# Environment:
# Defaults of RIG_DIR, RIG_PORT, RIG_INSTANCE and RIG_POOL_DEAD_AFTER_S: tools/remote/rig.conf.
#   RIG_DIR      state, logs and pid files; must be traversable
#                by the `postgres` user when run as root
#   RIG_PORT     BuildGrid's port on 127.0.0.1 (the one .bazelrc's configs name);
#                Redis listens on RIG_PORT + 100
#   RIG_INSTANCE REAPI instance name (as in .bazelrc)
#   RIG_PYTHON   Python >= 3.13 for BuildGrid (default: python3.13 on PATH or pyenv's newest)
#   RIG_VENV     BuildGrid's virtualenv, kept between runs (default
#                ~/.cache/torch_tests/buildgrid-<hash of requirements.lock>)
#   RIG_THREADS  BuildGrid's gRPC threads = concurrent RPCs (default 200, see buildgrid_config.py)
#   RIG_CPU_CAPACITY  actions the cpu worker runs at once (default 2)
#   RIG_GRPC_SERVER_OPTIONS  extra gRPC core args for BuildGrid, e.g. "grpc.max_concurrent_streams=32"
#   RIG_PG_DOWN_S  seconds `restart postgres` keeps PostgreSQL down (default 0)
#   RIG_POOL_DEAD_AFTER_S  seconds a pool may have no live worker before its queued actions
#                fail with an error naming it (pool_watchdog.py)
#   RIG_PG_BIN   PostgreSQL's bin folder (default: Debian's newest, installed if missing)
#   RIG_PG_USER  the user PostgreSQL runs as when run as root (default postgres)
#   RIG_WORKERS  a file of `NAME CAPACITY ARG...` lines, one worker each (default: the cpu and
#                gpu workers above; tools/remote/gpu_host/rig_gpu.sh writes a GPU host's)
#   RIG_EXTRA_POOLS  pools BuildGrid accepts besides the table's, space-separated (a GPU host's
#                own model: tools/remote/gpu_host/rig_gpu.sh sets it)
#   RIG_GRPC_DEFAULT_QUEUE=1  keep gRPC's default pending-call queue, which cancels the calls of a
#                cold upload (for tools/remote/bench_cold_uploads.sh "before")
set -euo pipefail
readonly root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "${root}/tools/remote/rig_lib.sh"

RIG_DIR="$(rig_setting RIG_DIR)"
export RIG_DIR
readonly port="$(rig_setting RIG_PORT)"
readonly redis_port=$((port + 100)) # the action cache's store
readonly instance="$(rig_setting RIG_INSTANCE)"
readonly venv="$(rig_venv)"
readonly lock="${root}/tools/remote/requirements.lock"
readonly logs="${RIG_DIR}/logs"
readonly pg="${RIG_DIR}/pg"
# The rig imports modules from the checkout; leave no __pycache__ in it.
export PYTHONDONTWRITEBYTECODE=1

readonly pg_user="${RIG_PG_USER:-postgres}"

# as_postgres CMD...: PostgreSQL refuses to run as root; use its system user then (from /: the
# checkout may be in a folder that user cannot enter; every path given is absolute).
as_postgres() {
  if [[ $(id -u) == 0 ]]; then (cd / && runuser -u "$pg_user" -- "$@"); else "$@"; fi
}

# ensure_debian PACKAGE PATH [COMMAND]: installs Debian's PACKAGE unless PATH (a glob) exists or
# COMMAND is on PATH.
ensure_debian() {
  compgen -G "$2" >/dev/null && return
  [[ -n ${3:-} ]] && command -v "$3" >/dev/null && return
  [[ $(id -u) == 0 ]] || rig_die "$1 is missing; run: sudo apt-get install $1"
  echo "rig: installing Debian's $1" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >&2
}

pg_bin() {
  [[ -n ${RIG_PG_BIN:-} ]] && { echo "$RIG_PG_BIN"; return; }
  ensure_debian postgresql '/usr/lib/postgresql/*/bin'
  ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1
}

ensure_venv() {
  local stamp="${venv}/.lock.sha256" want
  want="$(sha256sum "$lock" | cut -d' ' -f1)"
  [[ -x ${venv}/bin/bgd && -f $stamp && $(<"$stamp") == "$want" ]] && return
  local python
  python="$(find_python)"
  echo "rig: installing BuildGrid into ${venv} (${python})" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "${venv}/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes \
    --only-binary=:all: -r "$lock"
  echo "$want" >"$stamp"
}

pg_start() {
  # Unix socket only (no TCP at all); durability is irrelevant for a throw-away rig.
  local settings="-c listen_addresses='' -c unix_socket_directories=${pg} -c max_connections=200"
  # No JIT (its LLVM library is not carried to GPU hosts) and GMT, which needs no tzdata.
  settings+=" -c jit=off -c timezone=GMT -c log_timezone=GMT"
  settings+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  as_postgres "${1}/pg_ctl" -D "${pg}/data" -l "${pg}/postgres.log" -w -s start -o "$settings" ||
    rig_die "PostgreSQL did not start; see ${pg}/postgres.log"
}

pg_stop() { as_postgres "${1}/pg_ctl" -D "${pg}/data" -m fast -w -s stop; }

start_postgres() {
  local bin="$1"
  mkdir -p "$pg"
  [[ $(id -u) == 0 ]] && chown "${pg_user}:" "$pg"
  chmod 700 "$pg"
  as_postgres env TZ=GMT "${bin}/initdb" -D "${pg}/data" -U bgd --auth=trust -E UTF8 --no-instructions \
    >"${logs}/initdb.log" 2>&1 || rig_die "initdb failed; see ${logs}/initdb.log"
  pg_start "$bin"
  as_postgres "${bin}/createdb" -h "$pg" -U bgd bgd
  "${venv}/bin/bgd" migrate apply "postgresql+psycopg://bgd@/bgd?host=${pg}" >"${logs}/migrate.log" 2>&1 ||
    rig_die "BuildGrid's database migration failed; see ${logs}/migrate.log"
}

make_credentials() {
  (cd "$root" && "${venv}/bin/python" -m tools.remote.rig_auth "${RIG_DIR}/auth" "$instance")
  cat >"${RIG_DIR}/auth.bazelrc" <<EOF
# Written by tools/remote/rig.sh up: the developer credential of the rig on port ${port}.
# Quoted: an rc file splits words at spaces, so "Bearer" and the token would be two arguments.
build:remote "$(rig_auth_header dev)"
build:remote_cache "$(rig_auth_header dev)"
EOF
}

start_redis() {
  ensure_debian redis-server /usr/bin/redis-server redis-server
  local dir="${RIG_DIR}/redis"
  mkdir -p "$dir"
  chmod 700 "$dir"
  # Append-only file, fsync'd every second: the action cache outlives BuildGrid and Redis restarts.
  cat >"${dir}/redis.conf" <<EOF
bind 127.0.0.1
port ${redis_port}
dir ${dir}
appendonly yes
appendfsync everysec
save ""
daemonize no
requirepass $(<"${RIG_DIR}/auth/redis")
EOF
  chmod 600 "${dir}/redis.conf"
  start_daemon redis "${logs}/redis.log" redis-server "${dir}/redis.conf"
  local i
  for i in $(seq 100); do port_open "$redis_port" && return; sleep 0.1; done
  rig_die "Redis is not listening on 127.0.0.1:${redis_port}; see ${logs}/redis.log"
}

start_server() {
  local extra=() option
  for option in ${RIG_GRPC_SERVER_OPTIONS:-}; do extra+=("--grpc-server-option=${option}"); done
  [[ ${RIG_GRPC_DEFAULT_QUEUE:-0} == 1 ]] && extra+=(--grpc-default-queue)
  for option in ${RIG_EXTRA_POOLS:-}; do extra+=("--pool=${option}"); done
  (cd "$root" && python3 -m tools.remote.buildgrid_config --port "$port" --redis-port "$redis_port" \
    --instance "$instance" --state "$RIG_DIR" --pg-socket "$pg" --threads "${RIG_THREADS:-200}" "${extra[@]}") \
    >"${RIG_DIR}/buildgrid.yml"
  mkdir -p "${RIG_DIR}/cas"
  "${venv}/bin/bgd" server lint "${RIG_DIR}/buildgrid.yml" >/dev/null ||
    rig_die "invalid BuildGrid config ${RIG_DIR}/buildgrid.yml"
  start_daemon buildgrid "${logs}/buildgrid.log" "${venv}/bin/bgd" server start "${RIG_DIR}/buildgrid.yml"
  local i
  for i in $(seq 300); do
    port_open "$port" && return
    kill -0 "$(<"${RIG_DIR}/run/buildgrid.pid")" 2>/dev/null || break
    sleep 0.2
  done
  tail -20 "${logs}/buildgrid.log" >&2
  rig_die "BuildGrid is not listening on 127.0.0.1:${port}; see ${logs}/buildgrid.log"
}

# The loopback rig's workers: `cpu` for the cpu pool, `gpu` for every other pool (no GPU).
loopback_workers() {
  local cpu_pool other_pools=()
  cpu_pool="$(cd "$root" && python3 -m tools.remote.pools | awk '$1 == "cpu" {print $2}')"
  mapfile -t other_pools < <(cd "$root" && python3 -m tools.remote.pools | awk '$1 != "cpu" {print "--property=" $2}')
  echo "cpu ${RIG_CPU_CAPACITY:-2} --property=${cpu_pool}"
  echo "gpu 1 ${other_pools[*]}"
}

start_workers() {
  local specs=() spec names=() name i
  if [[ -n ${RIG_WORKERS:-} ]]; then
    mapfile -t specs <"$RIG_WORKERS"
  else
    mapfile -t specs < <(loopback_workers)
  fi
  for spec in "${specs[@]}"; do
    # shellcheck disable=SC2086 # NAME CAPACITY ARG...: words by design
    worker $spec
    names+=("${spec%% *}")
  done
  for name in "${names[@]}"; do
    for i in $(seq 100); do
      grep -q ' session ' "${logs}/worker-${name}.log" 2>/dev/null && continue 2
      sleep 0.2
    done
    rig_die "worker ${name} did not open a bot session; see ${logs}/worker-${name}.log"
  done
}

# A pool with no live worker gets its queued actions failed with a message naming it, instead of
# a silent wait (pool_watchdog.py; BuildGrid 0.9.1 has no such check).
start_watchdog() {
  start_daemon watchdog "${logs}/watchdog.log" env PYTHONPATH="$root" PYTHONUNBUFFERED=1 \
    "${venv}/bin/python" -m tools.remote.pool_watchdog --pg-socket "$pg" --cas "${RIG_DIR}/cas" \
    --dead-after "$(rig_setting RIG_POOL_DEAD_AFTER_S)"
}

# worker NAME CAPACITY --property=KEY=VALUE...
worker() {
  local name="$1" capacity="$2"
  shift 2
  mkdir -p "${RIG_DIR}/worker-${name}"
  start_daemon "worker-${name}" "${logs}/worker-${name}.log" \
    env PYTHONPATH="$root" PYTHONUNBUFFERED=1 "${venv}/bin/python" -m tools.remote.worker \
    --server "http://127.0.0.1:${port}" --token-file "${RIG_DIR}/auth/worker.token" \
    --instance "$instance" --name "$name" --capacity "$capacity" \
    --work-dir "${RIG_DIR}/worker-${name}" "$@"
}

up() {
  [[ -e ${RIG_DIR}/run ]] && rig_die "a rig already runs in ${RIG_DIR} (tools/remote/rig.sh down first)"
  port_open "$port" && rig_die "127.0.0.1:${port} is in use; set RIG_PORT"
  port_open "$redis_port" && rig_die "127.0.0.1:${redis_port} (Redis) is in use; set RIG_PORT"
  local bin
  bin="$(pg_bin)"
  ensure_debian bubblewrap /usr/bin/bwrap bwrap
  ensure_venv
  mkdir -p "${RIG_DIR}/run" "$logs"
  chmod 755 "$RIG_DIR"
  # From here on a failure leaves nothing running.
  trap 'echo "rig: up failed; stopping what started" >&2; down >/dev/null 2>&1' EXIT
  make_credentials
  start_postgres "$bin"
  start_redis
  start_server
  start_workers
  start_watchdog
  trap - EXIT
  echo "rig: up: grpc://127.0.0.1:${port} instance ${instance}; logs in ${logs}"
  echo "rig: developer credential in ${RIG_DIR}/auth.bazelrc (.bazelrc imports the default rig's)"
}

down() {
  if [[ -d ${RIG_DIR}/run ]]; then
    stop_daemon watchdog
    local pidfile
    for pidfile in "${RIG_DIR}"/run/worker-*.pid; do
      [[ -e $pidfile ]] && stop_daemon "$(basename "$pidfile" .pid)"
    done
    stop_daemon buildgrid
    stop_daemon redis
  fi
  if [[ -f ${pg}/data/postmaster.pid ]]; then
    pg_stop "$(pg_bin)" || true
  fi
  if [[ -f ${pg}/postgres.log ]]; then cp "${pg}/postgres.log" "${logs}/" 2>/dev/null || true; fi
  # Logs stay (the integration check reads them after `down`); the state goes.
  rm -rf "${RIG_DIR}/run" "$pg" "${RIG_DIR}/cas" "${RIG_DIR}"/worker-* "${RIG_DIR}/buildgrid.yml" \
    "${RIG_DIR}/redis" "${RIG_DIR}/auth" "${RIG_DIR}/auth.bazelrc"
  echo "rig: down"
}

status() {
  local name pidfile
  for pidfile in "${RIG_DIR}"/run/*.pid; do
    [[ -e $pidfile ]] || { echo "rig: not running (${RIG_DIR})"; return 1; }
    name="$(basename "$pidfile" .pid)"
    if kill -0 "$(<"$pidfile")" 2>/dev/null; then
      echo "running ${name} (pid $(<"$pidfile"))"
    else
      echo "DEAD    ${name}"
    fi
  done
  echo "endpoint grpc://127.0.0.1:${port} instance ${instance}; logs: ${logs}"
}

restart() {
  [[ -d ${RIG_DIR}/run ]] || rig_die "no rig runs in ${RIG_DIR}"
  case "${1:-}" in
    buildgrid) stop_daemon buildgrid && start_server ;;
    postgres)
      local bin
      bin="$(pg_bin)"
      pg_stop "$bin"
      sleep "${RIG_PG_DOWN_S:-0}"
      pg_start "$bin"
      ;;
    *) rig_die "usage: rig.sh restart buildgrid|postgres" ;;
  esac
  echo "rig: $1 restarted"
}

case "${1:-}" in
  up) up ;;
  restart) restart "${2:-}" ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
