#!/usr/bin/env bash
# The multi-GPU targets before and after their ranks' GPU peaks are recorded, on one GPU host,
# in one call: what recording the peaks buys (tools/runner/gpu_share.py).
#
#   setup   wheels installed (WHEELS), the targets built (server start, @pypi, runfiles) and
#           inductor's vector-ISA probes kept for the host, so neither run pays them
#   before  tools/bazel test --test_tag_filters=multi_gpu //..., cold (--nocache_test_results,
#           kernel caches emptied), with tools/test_times.bzl as it is: a target without a
#           recorded peak leases whole GPUs
#   record  tools/update_test_times.py on before's build events (the ranks' peaks, case seconds)
#   after   the same command, cold again, on the new record: targets share GPUs by memory
#
# Usage: bench/multi_gpu_before_after.sh [all|before|after]   (default all: the three stages)
# `before` ends after record; `after` alone (a later call on the same warm host) takes the
# record that `before` left in STATE_DIR.
#
# Writes to OUT (flat, 7 files): table.md (each run's wall; per target and shard: status,
# cases, GPUs leased, lease wait and share, seconds), env.txt (host, setup, record), before.log
# and after.log (Bazel's output), test_times.bzl (the record `before` made: commit it),
# testlogs_before.tgz and testlogs_after.tgz (every shard's test.log and test.xml). Each is
# written as its stage ends, so a call cut short still returns what finished.
#
# Environment:
#   TORCH_TEST_PYTHON        interpreter with CUDA torch (default: python3 on PATH)
#   TORCH_TEST_BAZEL_BUNDLE  Bazel bundle for hosts without Bazel/Java (tools/bundle/README.md)
#   WHEELS                   folder of wheels to install first with pip --no-index (e.g.
#                            expecttest, which the image lacks and cannot download); optional
#   OUT                      output folder (default bench/results/multi_gpu)
#   STATE_DIR                kept between calls (default /tmp/torch_tests_multi_gpu_before_after)
#   TAG_FILTERS              --test_tag_filters of both runs (default multi_gpu; empty: all)
#   FORGET_PEAKS=1           `before` starts from no recorded GPU peak at all (every GPU target
#                            leases whole GPUs), as a tree did before peaks were recorded
#   TARGETS                  patterns (default //...)
#   SETUP=1                  `after` alone runs setup first (a fresh host, the record as committed)
source "$(dirname "$0")/lib.sh"
stages="${1:-all}"
[[ $stages =~ ^(all|before|after)$ ]] || { echo "usage: $0 [all|before|after]" >&2; exit 2; }
out="${OUT:-${RESULTS_DIR}/multi_gpu}"
state="${STATE_DIR:-/tmp/torch_tests_multi_gpu_before_after}"
mkdir -p "$out" "$state"
read -r -a targets <<<"${TARGETS:-//...}"
# NVLink multicast stays off on shared GPU hosts; the macro also sets these for GPU tests.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_TEST_PYTHON="${TORCH_TEST_PYTHON:-$(command -v python3)}"
flags=(--test_tag_filters="${TAG_FILTERS-multi_gpu}" --build_tests_only --test_output=errors)
for var in NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS; do
  flags+=(--test_env="$var" --action_env="$var")
done
# The runner's kernel caches (tools/runner/process/kernel_cache.py ROOT); the vector-ISA memo
# is the host's and stays, as on any host that has run a test.
kernels="/tmp/torch_tests_kernels_$(id -u)"

setup() {
  if [[ -n ${WHEELS:-} ]]; then
    "$TORCH_TEST_PYTHON" -m pip install -q --no-index "$WHEELS"/*.whl
  fi
  {
    date -u
    nvidia-smi -L
    nproc
    "$TORCH_TEST_PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
  } >"${out}/env.txt" 2>&1
  local start=$SECONDS
  "$BAZEL" build --build_tag_filters="${TAG_FILTERS-multi_gpu}" "${targets[@]}" >>"${out}/env.txt" 2>&1
  echo "setup build: $((SECONDS - start)) s" | tee -a "${out}/env.txt"
  "$TORCH_TEST_PYTHON" bench/multi_gpu_table.py fill-memo | tee -a "${out}/env.txt"
}

# run NAME: one cold run, summarized at once (the next run overwrites the logs it names).
run() {
  local name=$1 start=$SECONDS status
  rm -rf "$kernels"
  set +e
  "$BAZEL" test "${flags[@]}" --nocache_test_results \
    --build_event_json_file="${state}/${name}.bep.json" "${targets[@]}" >"${out}/${name}.log" 2>&1
  status=$?
  set -e
  local wall=$((SECONDS - start))
  echo "${name}: bazel exit ${status}, wall ${wall} s" | tee -a "${out}/${name}.log"
  python3 bench/multi_gpu_table.py summarize "$name" "${state}/${name}.bep.json" "$wall" "$status" \
    "${state}/${name}.json" "${out}/testlogs_${name}.tgz"
  table
}

table() {
  local summaries=()
  for name in before after; do
    if [[ -f ${state}/${name}.json ]]; then summaries+=("${state}/${name}.json"); fi
  done
  python3 bench/multi_gpu_table.py render "${summaries[@]}" >"${out}/table.md"
  cat "${out}/table.md"
}

[[ $stages == after && ${SETUP:-} != 1 ]] || setup
if [[ $stages != after ]]; then
  rm -f "${state}"/{before,after}.json
  if [[ ${FORGET_PEAKS:-} == 1 ]]; then python3 bench/multi_gpu_table.py forget-peaks | tee -a "${out}/env.txt"; fi
  run before
  python3 tools/update_test_times.py "${state}/before.bep.json" | tee -a "${out}/env.txt"
  cp tools/test_times.bzl "${out}/test_times.bzl"
  cp tools/test_times.bzl "${state}/test_times.bzl"
fi
if [[ $stages != before ]]; then
  [[ -f ${state}/test_times.bzl ]] || { echo "no record in ${state}: run the before stage first" >&2; exit 2; }
  cp "${state}/test_times.bzl" tools/test_times.bzl
  [[ $stages == all ]] || cp tools/test_times.bzl "${out}/test_times.bzl"
  run after
fi
