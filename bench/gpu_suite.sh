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
#   TORCH_TEST_SLOTS_PER_GPU tests that may share a GPU (default 1: whole GPUs per test)
source "$(dirname "$0")/lib.sh"
# NVLink multicast stays off on shared GPU hosts; the macro also sets these for GPU tests.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCH_TEST_PYTHON="${TORCH_TEST_PYTHON:-$(command -v python3)}"
flags=(--test_tag_filters="${TAG_FILTERS:-gpu}" --test_output=errors)
export TORCH_TEST_SLOTS_PER_GPU="${TORCH_TEST_SLOTS_PER_GPU:-1}"
flags+=(--test_env=TORCH_TEST_SLOTS_PER_GPU)
for var in NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS; do
  flags+=(--test_env="$var" --action_env="$var")
done

{
  nvidia-smi -L
  echo "TORCH_TEST_SLOTS_PER_GPU=${TORCH_TEST_SLOTS_PER_GPU}"
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
grep -r "torch_test lease:" bazel-testlogs/ --include=test.log | sed 's|^bazel-testlogs/||' |
  tee "${RESULTS_DIR}/gpu_leases.txt" || true
tar -czhf "${RESULTS_DIR}/gpu_testlogs.tgz" --ignore-failed-read \
  $(find -L bazel-testlogs/ -name 'test.log' -o -name 'test.xml' 2>/dev/null) 2>/dev/null || true
exit "$status"
