#!/usr/bin/env bash
# Issue 39 on a lent GPU machine: the rig from carried files, then the three test packages through
# --config=remote on this host's GPU workers, again from a fresh output base (remote cache), once
# with the gpu variant's pool named for another GPU model (no cache hit, no worker), and in host
# mode for the wall to compare. Device calls are at most 10 minutes and 64 MiB each, so it runs
# in phases on one warm machine (tools/remote/README.md, "On a GPU host"):
#
#   run_remote_gpu.sh rig     carry .rig_gpu and .wheels: wheels, unpack, rig_gpu.sh up (~1 min)
#   run_remote_gpu.sh tests   carry .bundle: remote, remote_again, other_model, then host mode
#                             if the call's time allows (else run `host` next), then the rig down
#   run_remote_gpu.sh remote  carry .bundle: the remote run only (the rig stays up), where a
#                             cold remote run leaves too little of a call for the rest
#   run_remote_gpu.sh again   carry .bundle: remote_again and other_model, then the rig down
#   run_remote_gpu.sh host    carry .bundle: host mode only
#
# Writes to OUT (flat, at most 8 files, each written as its step ends): table.md (per run and
# target: status, cached, cases, worker and pool from the workers' `executed` lines, GPUs
# leased, seconds; per run: wall, exit, actions executed, most GPU actions at once), env.txt
# (host, GPUs, rig start, pool renames), remote.log, remote_again.log, other_model.log, host.log
# (Bazel's output), rig_logs.tgz (BuildGrid, workers, watchdog), testlogs.tgz (the remote run's
# test.log and test.xml files).
#
# Environment:
#   OUT                      output folder (default bench/results/remote_gpu)
#   TORCH_TEST_PYTHON        the image's interpreter (default python3 on PATH; empty: pinned mode)
#   TORCH_TEST_BAZEL_BUNDLE  Bazel bundle (tools/bundle/README.md)
#   WHEELS                   wheels to install with pip --no-index first (default .wheels)
#   TARGETS                  patterns (default the three packages)
#   STATE_DIR                output bases and summaries, kept between phases
#                            (default /tmp/torch_tests_run_remote_gpu)
#   RUN_BUDGET_S             seconds a phase may take in all (default 570: a call's 600 s less
#                            time to write results); each Bazel command is cut to fit it
#   KEEP_RIG=1               `tests` and `again` leave the rig running
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
readonly phase="${1:-}"
readonly out="${OUT:-bench/results/remote_gpu}"
readonly state="${STATE_DIR:-/tmp/torch_tests_run_remote_gpu}"
readonly rig=tools/remote/gpu_host/rig_gpu.sh
readonly budget="${RUN_BUDGET_S:-570}"
read -r -a targets <<<"${TARGETS:-//distributed_tests/... //dynamo_tests/... //upstream_style_tests/...}"
mkdir -p "$out" "$state"
# NVLink multicast stays off in every GPU process (the macro sets these for GPU tests too).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
TORCH_TEST_PYTHON="${TORCH_TEST_PYTHON-$(command -v python3)}"
if [[ -n $TORCH_TEST_PYTHON ]]; then export TORCH_TEST_PYTHON; else unset TORCH_TEST_PYTHON; fi
rig_dir="$(source tools/remote/rig_lib.sh && rig_setting RIG_DIR)"
rig_port="$(source tools/remote/rig_lib.sh && rig_setting RIG_PORT)"

die() { echo "run_remote_gpu: $*" | tee -a "${out}/env.txt" >&2; exit 2; }
note() { echo "run_remote_gpu: $*" | tee -a "${out}/env.txt"; }
left_s() { echo $((budget - SECONDS)); }

save_rig_logs() {
  [[ -d ${rig_dir}/logs ]] && tar -C "$rig_dir" -czf "${out}/rig_logs.tgz" logs
  true
}

# bazel_run NAME OUTPUT_BASE FLAGS...: one `bazel test` of the targets, cut to the phase's time,
# summarized into STATE_DIR/NAME.json and table.md.
bazel_run() {
  local name="$1" base="$2" start status limit
  shift 2
  limit=$(($(left_s) - 25))
  ((limit > 30)) || { note "${name}: skipped, ${limit} s left in this call"; return 0; }
  start="$(date +%s)"
  local t0=$SECONDS
  timeout -k 10 "$limit" tools/bazel --output_base="${state}/${base}" test "$@" \
    --build_event_json_file="${state}/${name}.bep.json" "${targets[@]}" >"${out}/${name}.log" 2>&1
  status=$?
  local wall=$((SECONDS - t0))
  note "${name}: bazel exit ${status}, wall ${wall} s$( ((status == 124)) && echo ", CUT at ${limit} s")"
  # No worker logs where no rig ran (host mode on a fresh machine): the glob is then empty.
  local logs=()
  shopt -s nullglob
  logs=("${rig_dir}"/logs/worker-*.log)
  shopt -u nullglob
  python3 -m tools.remote.gpu_host.remote_table summarize "$name" "${state}/${name}.bep.json" \
    "$wall" "$status" "$start" "${state}/${name}.json" "${logs[@]}" ||
    note "${name}: no summary"
  local summaries=()
  for name in remote remote_again other_model host; do
    [[ -f ${state}/${name}.json ]] && summaries+=("${state}/${name}.json")
  done
  python3 -m tools.remote.gpu_host.remote_table render "${summaries[@]}" >"${out}/table.md"
}

phase_rig() {
  local wheels="${WHEELS:-.wheels}"
  {
    date -u
    nvidia-smi -L
    echo "cores $(nproc)"
    ls -l /dev/nvidia* 2>&1
    "${TORCH_TEST_PYTHON:-python3}" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
  } >>"${out}/env.txt" 2>&1
  if [[ -d $wheels && -n ${TORCH_TEST_PYTHON:-} ]]; then
    "$TORCH_TEST_PYTHON" -m pip install -q --no-index "$wheels"/*.whl >>"${out}/env.txt" 2>&1 ||
      note "installing ${wheels} failed"
  fi
  local t0=$SECONDS
  "$rig" up >>"${out}/env.txt" 2>&1 || { save_rig_logs; die "rig_gpu.sh up failed (env.txt, rig_logs.tgz)"; }
  note "rig up in $((SECONDS - t0)) s"
  save_rig_logs
}

# The table names H200 pools; a host of another model serves its own (host_pools.py): the
# targets are pointed at them for this run (in this copy of the tree only).
retarget_pools() {
  local expressions
  expressions="$(python3 -m tools.remote.gpu_host.host_pools retarget)" || die "host_pools failed"
  [[ -z $expressions ]] && return
  note "pools renamed for this host: $(echo "$expressions" | tr '\n' ' ')"
  local e
  while read -r e; do sed -i "$e" tools/build_defs/variants.bzl; done <<<"$expressions"
}

# remote_flags: the rig's endpoint and credential named here, whatever RIG_DIR and RIG_PORT
# are; build events name the downloaded test.log/test.xml (file://), not CAS blobs
# (bytestream://), so the table can count cases. Sets `remote` and `flags` (with the host's
# tag filter), after pointing the targets at this host's pools; once per invocation.
remote_flags() {
  [[ -n ${flags+set} ]] && return
  "$rig" status >/dev/null 2>&1 || die "no rig runs here: run \`run_remote_gpu.sh rig\` first, on the same warm machine"
  retarget_pools
  local filter
  filter="$(python3 -m tools.remote.gpu_host.host_pools tag-filter)" || die "host_pools failed"
  note "tag filter: ${filter:-none}"
  remote=(--config=remote "--remote_executor=grpc://127.0.0.1:${rig_port}"
    "$(RIG_DIR="$rig_dir" && source tools/remote/rig_lib.sh && rig_auth_header dev)"
    --experimental_build_event_upload_strategy=local)
  flags=("${remote[@]}" "--test_tag_filters=${filter}")
}

phase_remote() {
  remote_flags
  bazel_run remote ob_remote "${flags[@]}"
  tar -C "$(tools/bazel --output_base="${state}/ob_remote" info bazel-testlogs 2>/dev/null)" -czf \
    "${out}/testlogs.tgz" --exclude='*.outputs*' . 2>/dev/null || true
  tools/bazel --output_base="${state}/ob_remote" shutdown >/dev/null 2>&1
  save_rig_logs
}

phase_again() {
  remote_flags
  bazel_run remote_again ob_again "${flags[@]}"
  # Another GPU model's pool for the gpu variant: nothing may come from the cache; no worker
  # serves it, so the watchdog fails its actions naming the pool.
  local pool other
  pool="$(python3 -m tools.remote.pools | awk '$1 == "gpu" {print $2}' | cut -d= -f2)"
  if [[ $pool == gpu-h200-* ]]; then other="${pool/h200/h100}"; else other="gpu-h200-x1"; fi
  cp tools/build_defs/variants.bzl "${state}/variants.bzl.kept"
  sed -i "s/\"${pool}\"/\"${other}\"/" tools/build_defs/variants.bzl
  note "other_model: the gpu variant's pool ${pool} -> ${other} (expected: no cache hit, and" \
    "Exit 34 naming the pool: BuildGrid does not know it, or the watchdog finds no worker)"
  bazel_run other_model ob_again "${remote[@]}" --test_tag_filters=gpu,-multi_gpu
  cp "${state}/variants.bzl.kept" tools/build_defs/variants.bzl
  tools/bazel --output_base="${state}/ob_again" shutdown >/dev/null 2>&1
  if [[ ${KEEP_RIG:-0} != 1 ]]; then "$rig" down >>"${out}/env.txt" 2>&1; fi
  save_rig_logs
}

phase_host() {
  local filter
  filter="$(python3 -m tools.remote.gpu_host.host_pools tag-filter)" || die "host_pools failed"
  bazel_run host ob_host "--test_tag_filters=${filter}"
  tools/bazel --output_base="${state}/ob_host" shutdown >/dev/null 2>&1
}

case "$phase" in
  rig) phase_rig ;;
  remote) phase_remote ;;
  again) phase_again ;;
  tests)
    phase_remote
    phase_again
    if (($(left_s) > 200)); then phase_host; else note "host mode: run \`run_remote_gpu.sh host\` next"; fi
    ;;
  host) phase_host ;;
  *) echo "usage: $0 rig|tests|remote|again|host" >&2; exit 2 ;;
esac
