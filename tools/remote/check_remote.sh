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
# and bazel-* links are left alone. Test results are judged from each invocation's build event
# file (tools/selftest/lib.sh: expect_result, tools/results/outcomes.py); the other computations
# are named functions of tools/remote/check_remote.py.
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
# facts NAME ARGS...: a computation of tools/remote/check_remote.py, by name.
facts() { python3 -m tools.remote.check_remote "$@"; }
# The pool property key and the cpu variant's pool (tools/build_defs: pools.bzl, variants.bzl).
read -r pool_key cpu_pool < <(facts cpu_pool)
readonly endpoint="grpc://127.0.0.1:${RIG_PORT}"
readonly clone="${scratch}/clone"
readonly logs="${RIG_DIR}/logs"
# The build event file of the `bazel test` being judged (lib.sh: test_events, expect_result).
readonly events="${scratch}/events.json"
targets=(//tools/remote:all //tools/selftest:probe_plain //tools/selftest:probe_tqdm)
# "SUFFIX POOL" of every GPU variant (tools/build_defs/variants.bzl).
gpu_variants="$(facts gpu_variants)"
# The widest variant's GPU count: the simulated GPUs of the GPU pools' worker (see above).
most_gpus="$(facts most_gpus)"
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
# links; prints its output and never fails (the expectations judge its build event file, or its
# output for what is no test result). A command that hangs (e.g. no worker for a pool) is
# stopped after 10 minutes.
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
executions() { facts executions "${logs}/worker-$1.log" || true; }

say "rig up on 127.0.0.1:${RIG_PORT}"
tools/remote/rig.sh up || { fail "rig did not come up"; finish; }

# Credentials the rig generated (rig.sh up): developers read, CI writes the action cache.
token() { cat "${RIG_DIR}/auth/$1.token" 2>/dev/null || true; }
remote+=("$(rig_auth_header dev)")

say "1. --config=remote: GPU variants go to the GPU pool's worker"
facts seed_pypi "${scratch}/ob1"
bazel_in "$workspace" "${scratch}/ob1" test "$(test_events "$events")" "${remote[@]}" "${targets[@]}" \
  >>"${scratch}/bazel.log"
for t in //tools/remote:probe "${gpu_probes[@]}" //tools/selftest:probe_plain //tools/selftest:probe_tqdm; do
  expect_result "$events" "$t" PASSED fresh "$t ran"
done
expect_no_result "$events" SKIPPED "no target SKIPPED"
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
bazel_in "$workspace" "${scratch}/ob1" test "$(test_events "$events")" --config=remote_cpu_only \
  "$(rig_auth_header dev)" "--remote_executor=${endpoint}" "${simulated[@]}" //tools/remote:all \
  >>"${scratch}/bazel.log"
for t in "${gpu_probes[@]}"; do
  expect_result "$events" "$t" SKIPPED any "$t SKIPPED"
done
expect_result "$events" //tools/remote:probe PASSED cached "cpu probe still cached"

say "3. a second clean clone gets every result from the remote cache"
git clone -q "$workspace" "$clone"
# This checkout's uncommitted state: changed and new files (not ignored ones), deletions.
git ls-files -z --modified --others --exclude-standard | while IFS= read -r -d '' f; do
  if [[ -e $f ]]; then mkdir -p "${clone}/$(dirname "$f")" && cp -p "$f" "${clone}/${f}"; else rm -f "${clone}/${f}"; fi
done
facts seed_pypi "${scratch}/ob2"
bazel_in "$clone" "${scratch}/ob2" test "$(test_events "$events")" "${remote[@]}" "${targets[@]}" \
  >>"${scratch}/bazel.log"
for t in //tools/remote:probe "${gpu_probes[@]}" //tools/selftest:probe_plain //tools/selftest:probe_tqdm; do
  expect_result "$events" "$t" PASSED cached "clone: $t from the remote cache"
done
executed_after=$(cat "${logs}"/worker-*.log | grep -c " executed {" || true)
if ((executed_after == executed_before)); then pass "clone: the workers ran nothing"; else
  fail "clone: the workers ran $((executed_after - executed_before)) actions"
fi

say "4. the pool is part of the action key"
read -r _ gpu_pool <<<"$gpu_variants"
other_pool="$(sed -n 2p <<<"$gpu_variants" | cut -d' ' -f2)"
sed -i "s/\"pool\": \"${gpu_pool}\"/\"pool\": \"${other_pool}\"/" "${clone}/tools/build_defs/variants.bzl"
bazel_in "$clone" "${scratch}/ob2" test "$(test_events "$events")" "${remote[@]}" //tools/remote:all \
  >>"${scratch}/bazel.log"
expect_result "$events" //tools/remote:probe_gpu PASSED fresh "gpu variant on another pool: re-ran"
expect_result "$events" //tools/remote:probe PASSED cached "cpu variant: still cached"
expect_line "$(executions gpu)" "^//tools/remote:probe_gpu ${pool_key}=${other_pool} test-setup.sh$" "re-ran on pool ${other_pool}"
cp "${workspace}/tools/build_defs/variants.bzl" "${clone}/tools/build_defs/variants.bzl"

say "5. --config=remote_cache: shared CPU results, read-only unless --config=ci"
cache=(--config=remote_cache "--remote_cache=${endpoint}" "${simulated[@]}" "$(rig_auth_header dev)")
nonce=(--test_env=REMOTE_CHECK_NONCE="$$-${RANDOM}") # a key no run has seen
# run_local FLAGS...: the cpu probe from a clean output tree, so only the remote cache can hit;
# its result goes to $events.
run_local() {
  bazel_in "$clone" "${scratch}/ob2" clean >/dev/null
  bazel_in "$clone" "${scratch}/ob2" test "$(test_events "$events")" "$@" //tools/remote:probe \
    >>"${scratch}/bazel.log"
}
run_local "${cache[@]}"
expect_result "$events" //tools/remote:probe PASSED cached \
  "local run served by the remotely executed result"
run_local "${cache[@]}" "${nonce[@]}"
run_local "${cache[@]}" "${nonce[@]}"
expect_result "$events" //tools/remote:probe PASSED fresh "developer run: result was not uploaded"
run_local "${cache[@]}" --config=ci "$(rig_auth_header ci)" "${nonce[@]}"
run_local "${cache[@]}" "${nonce[@]}"
expect_result "$events" //tools/remote:probe PASSED cached \
  "after a --config=ci run: served from the cache"

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
in_clone "$(test_events "$events")" //rigtest:tamper >>"${scratch}/bazel.log"
outcomes "$events" || true
in_clone "$(test_events "$events")" //rigtest:victim >>"${scratch}/bazel.log"
expect_result "$events" //rigtest:victim FAILED any "victim (exits 1) FAILED after tamper ran"
expect_result "$events" //rigtest:victim '!PASSED' any "victim not PASSED"

say "7. only CI's credential writes the action cache"
# update_result TOKEN_NAME: UpdateActionResult of a made-up action; prints accepted / refused CODE.
# (grpc and buildgrid: the rig's venv runs it.)
update_result() {
  "$(rig_venv)/bin/python" -m tools.remote.check_remote update_result "127.0.0.1:${RIG_PORT}" \
    "$(token "$1")"
}
expect_line "$(update_result none)" "^refused (UNAUTHENTICATED|PERMISSION_DENIED)$" "no credential: UpdateActionResult refused"
expect_line "$(update_result dev)" "^refused (UNAUTHENTICATED|PERMISSION_DENIED)$" "developer credential: UpdateActionResult refused"
expect_line "$(update_result ci)" "^accepted$" "CI credential: UpdateActionResult accepted"

say "8. a timeout terminates the test before killing it"
in_clone "$(test_events "$events")" --test_env=SLEEP_S=120 --test_timeout=5 //rigtest:sleeper \
  >>"${scratch}/bazel.log"
expect_result "$events" //rigtest:sleeper TIMEOUT any "sleeper TIMEOUT"
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
BAZEL_TIMEOUT_S=$((PG_RESTART_BOUND_S * 3)) in_clone "$(test_events "$events")" --test_env=SLEEP_S=5 \
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
expect_result "$events" //rigtest:sleeper PASSED fresh "sleeper PASSED across the restart"
if ((elapsed <= PG_RESTART_BOUND_S)); then pass "within ${PG_RESTART_BOUND_S} s"; else
  fail "took ${elapsed} s (bound ${PG_RESTART_BOUND_S} s)"
fi
runs=$(($(runs_of //rigtest:sleeper) - runs_before))
if ((runs == 1)); then pass "the sleeper ran once"; else fail "the sleeper ran ${runs} times"; fi

say "10. the action cache survives a BuildGrid restart"
tools/remote/rig.sh restart buildgrid >/dev/null || fail "BuildGrid did not restart"
run_local "${cache[@]}"
expect_result "$events" //tools/remote:probe PASSED cached "after the restart: served from the cache"

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
out="$(BAZEL_TIMEOUT_S=$((POOL_DEAD_BOUND_S * 2)) in_clone "$(test_events "$events")" --test_env=SLEEP_S=1 \
  //rigtest:sleeper_gpu)"
elapsed=$((SECONDS - killed_at))
echo "sleeper_gpu on the dead pool: Bazel returned ${elapsed} s after the worker died"
expect_line "$out" "no live worker in pool '${gpu_pool}'" "the error names the dead pool ${gpu_pool}"
expect_result "$events" //rigtest:sleeper_gpu '!PASSED' any "sleeper_gpu not PASSED"
if ((elapsed <= POOL_DEAD_BOUND_S)); then pass "reported within ${POOL_DEAD_BOUND_S} s"; else
  fail "took ${elapsed} s (bound ${POOL_DEAD_BOUND_S} s)"
fi

say "13. no test process outlives rig.sh down"
rig_down() { tools/remote/rig.sh down >/dev/null; }
expect_no_survivors "rig.sh down" //rigtest:sleeper rig_down
finish
