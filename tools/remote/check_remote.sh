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
#      here is not uploaded by default, and is with --config=ci.
# Probes are //tools/remote:probe* (a torch_test target per variant, no torch) and two
# //tools/selftest probes. The rig's GPU-pool worker has no GPUs: the probes' runner is told the
# host has 8 (--test_env=TORCH_TEST_HOST_GPUS, test_utils/hardware.py) so it leases simulated
# ones; the probes never touch CUDA.
# Runs Bazel with its own output bases and no convenience symlinks, so the workspace's server
# and bazel-* links are left alone.
#
# Environment: RIG_PORT (default 8981, so a rig on 8980 is left alone), BAZEL (default
# tools/bazel), CHECK_KEEP=1 keeps the scratch directory (logs, clone) for inspection.
source "$(dirname "$0")/../selftest/lib.sh"
readonly workspace="$PWD"
scratch="$(mktemp -d /tmp/torch_tests_remote_check.XXXXXX)"
chmod 755 "$scratch" # PostgreSQL runs as its own user under it
export RIG_DIR="${scratch}/rig" RIG_PORT="${RIG_PORT:-8981}"
readonly endpoint="grpc://127.0.0.1:${RIG_PORT}"
readonly clone="${scratch}/clone"
readonly logs="${RIG_DIR}/logs"
targets=(//tools/remote:all //tools/selftest:probe_plain //tools/selftest:probe_tqdm)
simulated=(--test_env=TORCH_TEST_HOST_GPUS=8)
remote=(--config=remote "--remote_executor=${endpoint}" "${simulated[@]}")
# "SUFFIX POOL" of every GPU variant (tools/build_defs/variants.bzl).
gpu_variants="$(python3 -c "from test_utils.hardware_table import table
for spec in table()['VARIANTS'].values():
    if spec['gpus']: print(spec['suffix'], spec['pool'])")"
gpu_probes=($(awk '{print "//tools/remote:probe" $1}' <<<"$gpu_variants"))

# bazel_in DIR OUTPUT_BASE COMMAND ARGS...: Bazel in DIR with its own output base and no bazel-*
# links; prints its output and never fails (the expectations judge the output). A command that
# hangs (e.g. no worker for a pool) is stopped after 10 minutes.
bazel_in() {
  local dir="$1" base="$2" command="$3"
  shift 3
  (cd "$dir" && timeout 600 "${workspace}/${BAZEL}" --output_base="$base" "$command" \
    --symlink_prefix=/ "$@" 2>&1) || true
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

say "1. --config=remote: GPU variants go to the GPU pool's worker"
out="$(bazel_in "$workspace" "${scratch}/ob1" test "${remote[@]}" "${targets[@]}")"
for t in //tools/remote:probe "${gpu_probes[@]}" //tools/selftest:probe_plain //tools/selftest:probe_tqdm; do
  expect_line "$out" "$(fresh "$t")" "$t ran"
done
expect_no_line "$out" "SKIPPED" "no target SKIPPED"
cpu="$(executions cpu)" gpu="$(executions gpu)"
echo "cpu worker ran:" && sed 's/^/  /' <<<"$cpu"
echo "gpu worker ran:" && sed 's/^/  /' <<<"$gpu"
expect_line "$cpu" "^//tools/remote:probe Pool=cpu test-setup.sh$" "cpu probe on the cpu worker"
while read -r suffix pool; do
  expect_line "$gpu" "^//tools/remote:probe${suffix} Pool=${pool} test-setup.sh$" \
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
out="$(bazel_in "$workspace" "${scratch}/ob1" test --config=remote_cpu_only \
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
expect_line "$(executions gpu)" "^//tools/remote:probe_gpu Pool=${other_pool} test-setup.sh$" "re-ran on pool ${other_pool}"
cp "${workspace}/tools/build_defs/variants.bzl" "${clone}/tools/build_defs/variants.bzl"

say "5. --config=remote_cache: shared CPU results, read-only unless --config=ci"
cache=(--config=remote_cache "--remote_cache=${endpoint}" "${simulated[@]}")
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
run_local "${cache[@]}" --config=ci "${nonce[@]}" >/dev/null
out="$(run_local "${cache[@]}" "${nonce[@]}")"
expect_line "$out" "$(cached //tools/remote:probe)" "after a --config=ci run: served from the cache"
finish
