#!/usr/bin/env bash
# Integration check of remote execution and caching against the loopback rig (rig.sh), for CI:
#   1. --config=remote: the cpu probes run on the cpu worker, every GPU variant's probe on the
#      worker of the GPU pools, with its own pool (worker logs, and the probes' own working
#      directories, say which); nothing is SKIPPED for lack of local GPUs.
#   2. --config=remote_cpu_only: the GPU probes are SKIPPED again.
#   3. A second clean clone (git clone + this checkout's uncommitted changes), own output base:
#      every test is a remote cache hit; the workers run nothing new.
#   4. Action keys: in that clone the gpu variant moves to another pool -> only its probe re-runs.
#   5. --config=remote_cache: a CPU result executed remotely serves a local run; a result run
#      here is not uploaded by default, and is with --config=ci (CI's credential).
# Faults a pool operator meets (issue 19), with the //rigtest targets (rigtest/, copied into the
# clone):
#   6. a test that rewrites its runfiles cannot change what a later action runs (victim FAILS);
#   7. the action cache refuses UpdateActionResult without CI's credential;
#   8. a timeout sends SIGTERM first (the test's stack dump reaches test.log);
#   9. a PostgreSQL restart mid-run costs seconds (bound: PG_RESTART_BOUND_S), and the test runs once;
#  10. the action cache survives a BuildGrid restart;
#  11. no test process outlives a killed worker;
#  12. a pool whose workers are dead is reported: its test fails with an error naming the pool
#      (bound: POOL_DEAD_BOUND_S after the worker died), not a silent wait in the queue;
#  13. no test process outlives `rig.sh down`.
# Probes are //tools/remote:probe* (a torch_test target per variant, no torch) and two
# //tools/selftest probes. The rig's GPU-pool worker has no GPUs: the probes' runner is told the
# host has as many as the widest variant needs (--test_env=TORCH_TEST_HOST_GPUS,
# tools/hardware/probe.py) so it leases simulated ones; the probes never touch CUDA.
# Runs Bazel with its own output bases and no convenience symlinks, so the workspace's server
# and bazel-* links are left alone.
#
# Environment: RIG_PORT (default 8981, so a rig on 8980 is left alone), BAZEL (default
# tools/bazel), CHECK_KEEP=1 keeps the scratch directory (logs, clone) for inspection.
source "$(dirname "$0")/../selftest/lib.sh"
source tools/remote/rig_lib.sh
readonly workspace="$PWD"
scratch="$(mktemp -d /tmp/torch_tests_remote_check.XXXXXX)"
chmod 755 "$scratch" # PostgreSQL runs as its own user under it
export RIG_DIR="${scratch}/rig" RIG_PORT="${RIG_PORT:-8981}"
RIG_INSTANCE="$(rig_setting RIG_INSTANCE)"
export RIG_INSTANCE
# The pool property key and the cpu variant's pool (tools/build_defs: pools.bzl, variants.bzl).
read -r pool_key cpu_pool < <(python3 -c "from tools.remote.pools import read_pools
key, pools = read_pools()
print(key, pools['cpu'])")
readonly endpoint="grpc://127.0.0.1:${RIG_PORT}"
readonly clone="${scratch}/clone"
readonly logs="${RIG_DIR}/logs"
targets=(//tools/remote:all //tools/selftest:probe_plain //tools/selftest:probe_tqdm)
# "SUFFIX POOL" of every GPU variant (tools/build_defs/variants.bzl).
gpu_variants="$(python3 -c "from tools.hardware.table import table
for spec in table()['VARIANTS'].values():
    if spec['gpus']: print(spec['suffix'], spec['pool'])")"
# The widest variant's GPU count: the simulated GPUs of the GPU pools' worker (see above).
most_gpus="$(python3 -c "from tools.hardware.table import table
print(max(spec['gpus'] for spec in table()['VARIANTS'].values()))")"
simulated=("--test_env=TORCH_TEST_HOST_GPUS=${most_gpus}")
remote=(--config=remote "--remote_executor=${endpoint}" "${simulated[@]}")
gpu_probes=($(awk '{print "//tools/remote:probe" $1}' <<<"$gpu_variants"))
# Check 9's bound. BuildGrid 0.9.1 refuses database work for 30 s after its first connection error
# (COOLDOWN_TIME_AFTER_POOL_DISPOSE_SECONDS, not configurable), so the finished test is reported
# ~30 s after PostgreSQL went down, whatever the outage; then up to 5 s until Bazel's next
# WaitExecution, and ~2 s of test setup and test.xml (tools/remote/README.md has the runs).
# 45 s = 30 + 5 + 10 for a loaded host.
readonly PG_RESTART_BOUND_S="${PG_RESTART_BOUND_S:-45}"
# Check 12's bound. The dead worker's bot session expires 60 s after its last call
# (bot-session-keepalive-timeout, buildgrid_config.py; the kill cancels its poll, so that is the
# moment of the kill), the watchdog waits RIG_POOL_DEAD_AFTER_S (10) more and looks every 2 s;
# Bazel learns of it at once (tools/remote/README.md has the runs).
readonly POOL_DEAD_BOUND_S="${POOL_DEAD_BOUND_S:-90}"

# bazel_in DIR OUTPUT_BASE COMMAND ARGS...: Bazel in DIR with its own output base and no bazel-*
# links; prints its output and never fails (the expectations judge the output). A command that
# hangs (e.g. no worker for a pool) is stopped after 10 minutes.
bazel_in() {
  local dir="$1" base="$2" command="$3"
  shift 3
  (cd "$dir" && timeout "${BAZEL_TIMEOUT_S:-600}" "${workspace}/${BAZEL}" --output_base="$base" \
    "$command" --symlink_prefix=/ "$@" 2>&1) || true
}
cleanup() {
  local base
  for base in "${scratch}/ob1" "${scratch}/ob2"; do
    [[ -d $base ]] && "${workspace}/${BAZEL}" --output_base="$base" shutdown >/dev/null 2>&1
  done
  tools/remote/rig.sh down >/dev/null 2>&1 || true
  if [[ ${CHECK_KEEP:-0} == 1 ]]; then echo "kept ${scratch}"; else rm -rf "$scratch"; fi
}
trap cleanup EXIT

# executions WORKER: the worker's "executed" records as "target pool" lines.
executions() {
  python3 - "${logs}/worker-$1.log" <<'PY' || true
import json, sys
for line in open(sys.argv[1]):
    if " executed {" in line:
        r = json.loads(line.split(" executed ", 1)[1])
        pool = ",".join(f"{k}={v}" for k, v in r["pool"].items()) or "(no pool)"
        print(r["target"], pool, r.get("program", "?"))
PY
}

say "rig up on 127.0.0.1:${RIG_PORT}"
tools/remote/rig.sh up || { fail "rig did not come up"; finish; }

# Credentials the rig generated (rig.sh up): developers read, CI writes the action cache.
token() { cat "${RIG_DIR}/auth/$1.token" 2>/dev/null || true; }
remote+=("$(rig_auth_header dev)")

say "1. --config=remote: GPU variants go to the GPU pool's worker"
out="$(bazel_in "$workspace" "${scratch}/ob1" test "${remote[@]}" "${targets[@]}")"
for t in //tools/remote:probe "${gpu_probes[@]}" //tools/selftest:probe_plain //tools/selftest:probe_tqdm; do
  expect_line "$out" "$(fresh "$t")" "$t ran"
done
expect_no_line "$out" "SKIPPED" "no target SKIPPED"
cpu="$(executions cpu)" gpu="$(executions gpu)"
echo "cpu worker ran:" && sed 's/^/  /' <<<"$cpu"
echo "gpu worker ran:" && sed 's/^/  /' <<<"$gpu"
expect_line "$cpu" "^//tools/remote:probe ${pool_key}=${cpu_pool} test-setup.sh$" "cpu probe on the cpu worker"
while read -r suffix pool; do
  expect_line "$gpu" "^//tools/remote:probe${suffix} ${pool_key}=${pool} test-setup.sh$" \
    "probe${suffix} on the gpu worker, pool ${pool}"
done <<<"$gpu_variants"
expect_line "$cpu" "^//tools/selftest:probe_tqdm " "selftest probe on the cpu worker"
expect_no_line "$cpu" "^//tools/remote:probe_" "no GPU probe on the cpu worker"
expect_no_line "$(grep -Ev '^//tools/remote:probe_' <<<"$gpu")" . "nothing else on the gpu worker"
testlogs="${scratch}/ob1/execroot/torch_tests/bazel-out/k8-fastbuild/testlogs"
expect_line "$(cat "${testlogs}/tools/remote/probe_gpu/test.log")" "^cwd ${RIG_DIR}/worker-gpu/" \
  "probe_gpu's working directory is on the gpu worker"
executed_before=$(cat "${logs}"/worker-*.log | grep -c " executed {" || true)

say "2. --config=remote_cpu_only: GPU variants SKIPPED"
out="$(bazel_in "$workspace" "${scratch}/ob1" test --config=remote_cpu_only "$(rig_auth_header dev)" \
  "--remote_executor=${endpoint}" "${simulated[@]}" //tools/remote:all)"
for t in "${gpu_probes[@]}"; do
  expect_line "$out" "^$t +SKIPPED" "$t SKIPPED"
done
expect_line "$out" "$(cached //tools/remote:probe)" "cpu probe still cached"

say "3. a second clean clone gets every result from the remote cache"
git clone -q "$workspace" "$clone"
# This checkout's uncommitted state: changed and new files (not ignored ones), deletions.
git ls-files -z --modified --others --exclude-standard | while IFS= read -r -d '' f; do
  if [[ -e $f ]]; then mkdir -p "${clone}/$(dirname "$f")" && cp -p "$f" "${clone}/${f}"; else rm -f "${clone}/${f}"; fi
done
out="$(bazel_in "$clone" "${scratch}/ob2" test "${remote[@]}" "${targets[@]}")"
for t in //tools/remote:probe "${gpu_probes[@]}" //tools/selftest:probe_plain //tools/selftest:probe_tqdm; do
  expect_line "$out" "$(cached "$t")" "clone: $t from the remote cache"
done
executed_after=$(cat "${logs}"/worker-*.log | grep -c " executed {" || true)
if ((executed_after == executed_before)); then pass "clone: the workers ran nothing"; else
  fail "clone: the workers ran $((executed_after - executed_before)) actions"
fi

say "4. the pool is part of the action key"
read -r _ gpu_pool <<<"$gpu_variants"
other_pool="$(sed -n 2p <<<"$gpu_variants" | cut -d' ' -f2)"
sed -i "s/\"pool\": \"${gpu_pool}\"/\"pool\": \"${other_pool}\"/" "${clone}/tools/build_defs/variants.bzl"
out="$(bazel_in "$clone" "${scratch}/ob2" test "${remote[@]}" //tools/remote:all)"
expect_line "$out" "$(fresh //tools/remote:probe_gpu)" "gpu variant on another pool: re-ran"
expect_line "$out" "$(cached //tools/remote:probe)" "cpu variant: still cached"
expect_line "$(executions gpu)" "^//tools/remote:probe_gpu ${pool_key}=${other_pool} test-setup.sh$" "re-ran on pool ${other_pool}"
cp "${workspace}/tools/build_defs/variants.bzl" "${clone}/tools/build_defs/variants.bzl"

say "5. --config=remote_cache: shared CPU results, read-only unless --config=ci"
cache=(--config=remote_cache "--remote_cache=${endpoint}" "${simulated[@]}" "$(rig_auth_header dev)")
nonce=(--test_env=REMOTE_CHECK_NONCE="$$-${RANDOM}") # a key no run has seen
# run_local FLAGS...: the cpu probe from a clean output tree, so only the remote cache can hit.
run_local() {
  bazel_in "$clone" "${scratch}/ob2" clean >/dev/null
  bazel_in "$clone" "${scratch}/ob2" test "$@" //tools/remote:probe
}
out="$(run_local "${cache[@]}")"
expect_line "$out" "$(cached //tools/remote:probe)" "local run served by the remotely executed result"
run_local "${cache[@]}" "${nonce[@]}" >/dev/null
out="$(run_local "${cache[@]}" "${nonce[@]}")"
expect_line "$out" "$(fresh //tools/remote:probe)" "developer run: result was not uploaded"
run_local "${cache[@]}" --config=ci "$(rig_auth_header ci)" "${nonce[@]}" >/dev/null
out="$(run_local "${cache[@]}" "${nonce[@]}")"
expect_line "$out" "$(cached //tools/remote:probe)" "after a --config=ci run: served from the cache"

# The fault targets, as package //rigtest of the clone; sleeper_gpu goes to the gpu variant's pool.
mkdir -p "${clone}/rigtest"
cp tools/remote/rigtest/*.py "${clone}/rigtest/"
cp tools/remote/rigtest/BUILD.rigtest "${clone}/rigtest/BUILD.bazel"
# in_clone ARGS...: bazel test in the clone against the rig, results never taken from the cache.
in_clone() { bazel_in "$clone" "${scratch}/ob2" test "${remote[@]}" --nocache_test_results "$@"; }
# in_clone_bg ARGS...: in_clone in the background, in its own session; stop_bg interrupts it.
in_clone_bg() { setsid bash -c "$(declare -f bazel_in in_clone); $(declare -p remote scratch clone workspace BAZEL); in_clone \"\$@\"" _ "$@" >>"${scratch}/background.log" & bg_pid=$!; }
# The interrupted command would keep the clone's Bazel server busy: end that server too.
stop_bg() {
  kill -TERM -- "-${bg_pid}" 2>/dev/null || true
  wait "$bg_pid" 2>/dev/null || true
  kill -KILL "$(cat "${scratch}/ob2/server/server.pid.txt" 2>/dev/null)" 2>/dev/null || true
}
# action_processes NONCE: pids of processes whose environment carries NONCE (any pid namespace).
action_processes() {
  grep -lsa -- "RIG_CHECK_NONCE=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | tr '\n' ' ' || true
}
# wait_for_action NONCE: until a process of that action runs (60 s at most).
wait_for_action() {
  local i
  for i in $(seq 300); do [[ -n $(action_processes "$1") ]] && return 0; sleep 0.2; done
  return 1
}

# Runs TARGET (a sleeper, 300 s) in the background and STOP (a command) once its action runs;
# then no process of that action may be left.
expect_no_survivors() {
  local what=$1 target=$2 stop=$3 nonce="survivor-$$-${RANDOM}" left
  BAZEL_TIMEOUT_S=120 in_clone_bg --test_env=SLEEP_S=300 "--test_env=RIG_CHECK_NONCE=${nonce}" \
    "$target"
  if wait_for_action "$nonce"; then
    "$stop"
    left="$(action_processes "$nonce")"
    if [[ -z $left ]]; then pass "${what}: no test process left"; else
      fail "${what}: test processes ${left}survive"
      kill -KILL $left 2>/dev/null || true
    fi
  else
    fail "${target} never started"
  fi
  stop_bg
}

say "6. a test cannot change the inputs of later actions"
out="$(in_clone //rigtest:tamper)"
echo "$out" | grep -E '^//rigtest' || true
out="$(in_clone //rigtest:victim)"
expect_line "$out" "^//rigtest:victim +FAILED" "victim (exits 1) FAILED after tamper ran"
expect_no_line "$out" "^//rigtest:victim .*PASSED" "victim not PASSED"

say "7. only CI's credential writes the action cache"
# update_result TOKEN_NAME: UpdateActionResult of a made-up action; prints accepted / refused CODE.
update_result() {
  "$(rig_venv)/bin/python" - "127.0.0.1:${RIG_PORT}" "$(token "$1")" <<'PY'
import hashlib, os, sys
import grpc
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb2
from buildgrid._protos.build.bazel.remote.execution.v2.remote_execution_pb2_grpc import ActionCacheStub
blob = os.urandom(16)
request = re_pb2.UpdateActionResultRequest(
    instance_name=os.environ["RIG_INSTANCE"],
    action_digest=re_pb2.Digest(hash=hashlib.sha256(blob).hexdigest(), size_bytes=len(blob)),
    action_result=re_pb2.ActionResult(exit_code=0),
)
metadata = [("authorization", f"Bearer {sys.argv[2]}")] if sys.argv[2] else []
try:
    ActionCacheStub(grpc.insecure_channel(sys.argv[1])).UpdateActionResult(request, metadata=metadata, timeout=30)
    print("accepted")
except grpc.RpcError as error:
    print("refused", error.code().name)
PY
}
expect_line "$(update_result none)" "^refused (UNAUTHENTICATED|PERMISSION_DENIED)$" "no credential: UpdateActionResult refused"
expect_line "$(update_result dev)" "^refused (UNAUTHENTICATED|PERMISSION_DENIED)$" "developer credential: UpdateActionResult refused"
expect_line "$(update_result ci)" "^accepted$" "CI credential: UpdateActionResult accepted"

say "8. a timeout terminates the test before killing it"
out="$(in_clone --test_env=SLEEP_S=120 --test_timeout=5 //rigtest:sleeper)"
expect_line "$out" "^//rigtest:sleeper +TIMEOUT" "sleeper TIMEOUT"
expect_line "$(cat "${scratch}/ob2/execroot/torch_tests/bazel-out/k8-fastbuild/testlogs/rigtest/sleeper/test.log" 2>/dev/null)" \
  "^sleeper: got SIGTERM" "SIGTERM reached the test (its handler's line is in test.log)"

say "9. a PostgreSQL restart mid-run costs seconds, and the test runs once"
# PostgreSQL is down when the test ends: the worker's report and BuildGrid's notification of it
# come after the restart.
nonce="pg-$$-${RANDOM}"
# runs_of TARGET: how many times the workers ran TARGET's test (not its test.xml action).
runs_of() { { executions cpu; executions gpu; } | grep -c "^$1 .* test-setup.sh$" || true; }

runs_before=$(runs_of //rigtest:sleeper)
start=$SECONDS
BAZEL_TIMEOUT_S=$((PG_RESTART_BOUND_S * 3)) in_clone --test_env=SLEEP_S=5 \
  "--test_env=RIG_CHECK_NONCE=${nonce}" //rigtest:sleeper >"${scratch}/pg_run.log" &
bazel_pid=$!
if wait_for_action "$nonce"; then
  RIG_PG_DOWN_S=10 tools/remote/rig.sh restart postgres >/dev/null || fail "PostgreSQL did not restart"
else
  fail "sleeper never started"
fi
wait "$bazel_pid"
elapsed=$((SECONDS - start))
echo "sleeper (5 s) with PostgreSQL down for 10 s: ${elapsed} s"
expect_line "$(cat "${scratch}/pg_run.log")" "$(fresh //rigtest:sleeper)" "sleeper PASSED across the restart"
if ((elapsed <= PG_RESTART_BOUND_S)); then pass "within ${PG_RESTART_BOUND_S} s"; else
  fail "took ${elapsed} s (bound ${PG_RESTART_BOUND_S} s)"
fi
runs=$(($(runs_of //rigtest:sleeper) - runs_before))
if ((runs == 1)); then pass "the sleeper ran once"; else fail "the sleeper ran ${runs} times"; fi

say "10. the action cache survives a BuildGrid restart"
tools/remote/rig.sh restart buildgrid >/dev/null || fail "BuildGrid did not restart"
out="$(run_local "${cache[@]}")"
expect_line "$out" "$(cached //tools/remote:probe)" "after the restart: served from the cache"

say "11. no test process outlives a killed worker"
kill_gpu_worker() {
  kill -KILL "$(<"${RIG_DIR}/run/worker-gpu.pid")"
  killed_at=$SECONDS
  sleep 3
}
killed_at=$SECONDS
expect_no_survivors "killed worker" //rigtest:sleeper_gpu kill_gpu_worker

say "12. a dead pool is reported, not waited on"
# The GPU pools' only worker is dead since check 11: a test for them fails with an error naming
# its pool (tools/remote/pool_watchdog.py) instead of waiting in the queue.
kill -KILL "$(<"${RIG_DIR}/run/worker-gpu.pid")" 2>/dev/null || true
out="$(BAZEL_TIMEOUT_S=$((POOL_DEAD_BOUND_S * 2)) in_clone --test_env=SLEEP_S=1 //rigtest:sleeper_gpu)"
elapsed=$((SECONDS - killed_at))
echo "sleeper_gpu on the dead pool: Bazel returned ${elapsed} s after the worker died"
expect_line "$out" "no live worker in pool '${gpu_pool}'" "the error names the dead pool ${gpu_pool}"
expect_no_line "$out" "^//rigtest:sleeper_gpu .*PASSED" "sleeper_gpu not PASSED"
if ((elapsed <= POOL_DEAD_BOUND_S)); then pass "reported within ${POOL_DEAD_BOUND_S} s"; else
  fail "took ${elapsed} s (bound ${POOL_DEAD_BOUND_S} s)"
fi

say "13. no test process outlives rig.sh down"
rig_down() { tools/remote/rig.sh down >/dev/null; }
expect_no_survivors "rig.sh down" //rigtest:sleeper rig_down
finish
