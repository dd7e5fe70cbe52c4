#!/usr/bin/env bash
# On a GPU host, in host-interpreter mode (the image's torch): the cpu target's torch sees no GPU,
# the gpu target's torch sees exactly the GPU it leased (tools/selftest/probe_accelerators.py).
# Own output base, so the workspace's server and @pypi (pinned mode) are left alone.
source "$(dirname "$0")/lib.sh"
private_output_base torch_test_accelerators
export TORCH_TEST_PYTHON="${TORCH_TEST_PYTHON:-$(command -v python3)}"

say "the probes on ${TORCH_TEST_PYTHON}"
events="$scratch/events.json"
private_bazel test "$(test_events "$events")" //tools/selftest:probe_accelerators \
  //tools/selftest:probe_accelerators_gpu >"$scratch/bazel.log" 2>&1 || true
expect_result "$events" //tools/selftest:probe_accelerators PASSED fresh "cpu target: no GPU visible"
expect_result "$events" //tools/selftest:probe_accelerators_gpu PASSED fresh "gpu target: its leased GPU"
finish
