#!/usr/bin/env bash
# Host-interpreter mode (TORCH_TEST_PYTHON) with a throw-away venv holding torch and pytest:
#   - tests run on that interpreter's packages; a locked pure-Python package it lacks (tqdm,
#     expecttest) is supplied from the lock, so //test_utils:torch_testing works; a locked
#     package with compiled code it lacks (fbgemm-gpu-cpu) makes the targets needing it
#     SKIPPED, never PASSED; @pypi//:manifest.json says which;
#   - a second run is (cached); installing one more package changes the environment
#     fingerprint and re-runs the tests.
# Uses its own output base, so the pinned-mode server and cache are left alone.
source "$(dirname "$0")/lib.sh"
private_output_base torch_test_host_mode

say "a host image: venv with torch 2.13.0 and pytest (no torchrec, no tqdm, no expecttest)"
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install -q torch==2.13.0 pytest numpy
export TORCH_TEST_PYTHON="$scratch/venv/bin/python3"
# Not test_aot_autograd: it would cost the lane minutes of CPU and no check reads its result.
# A pattern, not test_torchrec's label: Bazel 4.2.3 fails a build that names an incompatible
# target (torchrec missing), and reports one a pattern matches as SKIPPED.
targets=(-- //tools/selftest:all //dynamo_tests:all -//dynamo_tests:test_aot_autograd
  //test_utils/tests:test_torch_testing)

events="$scratch/events.json"
# test_targets [TARGET...]: tests those (default: all of the above); their results go to
# $events, Bazel's output to bazel.log.
test_targets() {
  local chosen=("$@")
  ((${#chosen[@]})) || chosen=("${targets[@]}")
  private_bazel test "$(test_events "$events")" "${chosen[@]}" >"$scratch/bazel.log" 2>&1 || true
}

test_targets
expect_result "$events" //dynamo_tests:test_recompile_ux PASSED fresh \
  "torch test ran on the host interpreter"
expect_result "$events" //tools/selftest:probe_plain PASSED fresh "probe ran on the host interpreter"
expect_result "$events" //dynamo_tests:test_torchrec SKIPPED any "torchrec missing: its test is SKIPPED"
expect_result "$events" //tools/selftest:probe_tqdm PASSED fresh \
  "tqdm (pure Python) supplied from the lock"
expect_result "$events" //test_utils/tests:test_torch_testing PASSED fresh \
  "expecttest (pure Python) supplied from the lock: torch.testing._internal works"
manifest="$(cat "$scratch"/output_base/external/pypi/manifest.json)"
expect_line "$manifest" '"mode": "host"' "manifest: host mode"
expect_line "$manifest" '"expecttest": "0\.' "manifest: expecttest's version"
expect_line "$(tr -d ' \n' <<<"$manifest")" '"missing":\[[^]]*"fbgemm-gpu-cpu"' "manifest: fbgemm-gpu-cpu missing"
expect_line "$(cat "$scratch"/output_base/external/pypi/fingerprint.txt)" "^torch 2\.13\.0" \
  "fingerprint records torch"

test_targets
expect_result "$events" //dynamo_tests:test_recompile_ux PASSED cached "unchanged image: cached"

say "the image changes: one more package"
"$scratch/venv/bin/pip" install -q six
# The two targets judged: the others would only repeat the first run's work.
test_targets //dynamo_tests:test_recompile_ux //tools/selftest:probe_plain
expect_result "$events" //dynamo_tests:test_recompile_ux PASSED fresh \
  "changed fingerprint: torch test re-ran"
expect_result "$events" //tools/selftest:probe_plain PASSED fresh "changed fingerprint: probe re-ran"
finish
