#!/usr/bin/env bash
# A host with GPUs whose tests' torch cannot use them (here: the pinned CPU torch, no
# host mode) must stop `tools/bazel test` before any test runs, saying how to run the GPU
# variants or to ask for the CPU ones; `--config=cpu` still runs. This CPU host fakes the GPUs
# with an `nvidia-smi` on PATH (tools/platforms/host_hardware.bzl asks it for the GPU list).
source "$(dirname "$0")/lib.sh"
fake="$(mktemp -d /tmp/check_gpu_host.XXXXXX)"
# Back to this host's own hardware: the rule re-runs when its --repo_env changes.
trap '"$BAZEL" query @local_hardware//:host >/dev/null 2>&1 || true; rm -rf "$fake"' EXIT
cat >"$fake/nvidia-smi" <<'SMI'
#!/bin/sh
echo "NVIDIA H100 80GB HBM3, 550.54.15"
SMI
chmod +x "$fake/nvidia-smi"
events="$fake/events.json"
probe=//tools/selftest:probe_plain

# The rule re-runs on a change of its --repo_env, not of PATH (tools/platforms/host_hardware.bzl):
# TORCH_TEST_CPU_ONLY=0 (not CPU only, like unset) makes it look at the fake nvidia-smi.
say "GPUs the pinned torch cannot use: bazel test stops before running anything"
out="$(PATH="$fake:$PATH" "$BAZEL" test --repo_env=TORCH_TEST_CPU_ONLY=0 "$(test_events "$events")" "$probe" 2>&1)" &&
  fail "bazel test succeeded on a GPU host with the pinned CPU torch" ||
  pass "bazel test failed"
expect_line "$out" 'this host has 1 GPU\(s\) \(NVIDIA H100 80GB HBM3, 550.54.15\), but the tests use the pinned lock.s torch, a CPU build' "it names the GPUs and why they are unusable"
expect_line "$out" 'tools/bazel setup --host-python=\$\(command -v python3\)' "it says how to run the GPU variants"
expect_line "$out" 'tools/bazel test --config=cpu //\.\.\.' "it says how to ask for CPU only"
if [[ -s $events ]]; then expect_no_result "$events" PASSED "no test ran"; else pass "no test ran (no build events)"; fi

say "--config=cpu on the same host runs the CPU variants"
PATH="$fake:$PATH" "$BAZEL" test --config=cpu "$(test_events "$events")" "$probe" >"$fake/bazel.log" 2>&1 || true
expect_result "$events" "$probe" PASSED any "--config=cpu: $probe PASSED"
finish
