#!/usr/bin/env bash
# The GPU suite on a GPU host, through real Bazel in host-interpreter mode: every gpu and
# multi_gpu target of //..., the GPU lease packing 1-GPU targets onto free GPUs. Writes the
# Bazel log, per-target test-case counts, the GPUs each target leased and all test logs to
# RESULTS_DIR.
# Environment:
#   TORCH_TEST_PYTHON        interpreter with CUDA torch (default: python3 on PATH)
#   TORCH_TEST_BAZEL_BUNDLE  Bazel bundle for hosts without Bazel/Java (tools/bundle)
#   RESULTS_DIR              output folder (default bench/results)
#   BAZEL_TIMEOUT            seconds for the test run (default 480)
#   TAG_FILTERS              --test_tag_filters value (default gpu)
#   TORCH_TEST_SLOTS_PER_GPU tests that share a GPU (default unset: tools/runner/gpu_share.py
#                            decides per target from recorded peak GPU memory)
source "$(dirname "$0")/lib.sh"
# NVLink multicast stays off on shared GPU hosts; the macro also sets these for GPU tests.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_TEST_PYTHON="${TORCH_TEST_PYTHON:-$(command -v python3)}"
flags=(--test_tag_filters="${TAG_FILTERS:-gpu}" --test_output=errors)
[[ -z ${TORCH_TEST_SLOTS_PER_GPU:-} ]] || flags+=(--test_env=TORCH_TEST_SLOTS_PER_GPU)
for var in NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS; do
  flags+=(--test_env="$var" --action_env="$var")
done

{
  nvidia-smi -L
  echo "TORCH_TEST_SLOTS_PER_GPU=${TORCH_TEST_SLOTS_PER_GPU:-(policy)}"
  "$TORCH_TEST_PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
} >"${RESULTS_DIR}/gpu_env.txt" 2>&1
cat "${RESULTS_DIR}/gpu_env.txt"

start=$SECONDS
set +e
timeout "${BAZEL_TIMEOUT:-480}" "$BAZEL" test "${flags[@]}" \
  --build_event_json_file="${RESULTS_DIR}/gpu_suite.bep.json" //... 2>&1 | tee "${RESULTS_DIR}/gpu_suite.log"
status=${PIPESTATUS[0]}
set -e
echo "bazel exit ${status}, wall $((SECONDS - start)) s" | tee -a "${RESULTS_DIR}/gpu_suite.log"

python3 tools/ci/summarize_testlogs.py "${RESULTS_DIR}/gpu_suite.bep.json" | tee "${RESULTS_DIR}/gpu_cases.txt"
# This invocation's GPU leases and test logs, from its build event file (tools/results).
python3 - "${RESULTS_DIR}/gpu_suite.bep.json" "${RESULTS_DIR}/gpu_testlogs.tgz" <<'PY' |
import sys, tarfile
from tools.results import bep
targets = bep.read(sys.argv[1])
with tarfile.open(sys.argv[2], "w:gz") as archive:
    for label, target in targets.items():
        for attempt in target.final_attempts():
            for name, path in attempt.outputs.items():
                if name in ("test.log", "test.xml") and path.is_file():
                    archive.add(path, f"{label[2:].replace(':', '/')}/shard_{attempt.shard}/{name}")
        for log in target.log_files():
            for line in log.read_text(errors="replace").splitlines():
                if "torch_test lease:" in line:
                    print(f"{label}: {line}")
PY
  tee "${RESULTS_DIR}/gpu_leases.txt" || true
exit "$status"
