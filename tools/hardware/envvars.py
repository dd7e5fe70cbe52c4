"""Every TORCH_TEST_* variable the macro, the runner, the harness and the tests pass on.

One name per fact, here for Python and in tools/hardware/envvars.bzl for Starlark;
//test_utils/tests:test_hardware_table checks the two agree. Structured values are JSON
(`encode`/`decode`), as Starlark's json.encode writes them: no second encoding to parse.
Standard library only: the rig and bench/ import it outside Bazel.
"""

import json

# Every name below starts with it; torch_test refuses a target env that sets one.
PREFIX = "TORCH_TEST_"

# Set by the torch_test macro (tools/build_defs/torch_test.bzl) for every target.
VARIANT = "TORCH_TEST_VARIANT"  # this target's variant
VARIANTS = "TORCH_TEST_VARIANTS"  # JSON [[variant, GPUs]], in the table's order
DECLARED_VARIANTS = "TORCH_TEST_DECLARED_VARIANTS"  # JSON [variant]: the source's targets
DECLARED_FEATURES = "TORCH_TEST_DECLARED_FEATURES"  # JSON {variant: [feature]}
WHOLE_GPU = "TORCH_TEST_WHOLE_GPU"  # "1": never share a GPU (tools/runner/gpu_share.py)
EXPECTATIONS = "TORCH_TEST_EXPECTATIONS"  # the declared-outcomes file (test_utils/expectations.py)
# Recorded per target (tools/build_defs/recorded.bzl).
DURATIONS = "TORCH_TEST_DURATIONS"  # JSON {node id: seconds}
GPU_PEAK_MIB = "TORCH_TEST_GPU_PEAK_MIB"  # peak GPU memory of the test process
# Set by the runner for the processes it starts.
DEADLINE = "TORCH_TEST_DEADLINE"  # epoch seconds by which harness timeouts must have fired
HOST_GPUS = "TORCH_TEST_HOST_GPUS"  # this host's GPU count once probed (the rig sets it too)
GPU_MEMORY_FRACTION = "TORCH_TEST_GPU_MEMORY_FRACTION"  # this test's share of its GPUs
# Set by users or self-tests (--test_env).
GPU_LEASE_DIR = "TORCH_TEST_GPU_LEASE_DIR"  # the GPU lease's lock directory
JOBS_DIR = "TORCH_TEST_JOBS_DIR"  # the thread budget's registry of running tests
SLOTS_PER_GPU = "TORCH_TEST_SLOTS_PER_GPU"  # overrides the GPU sharing policy
START_METHOD = "TORCH_TEST_START_METHOD"  # rank processes: "forkserver" or "spawn"
NODE_IDS = "TORCH_TEST_NODE_IDS"  # JSON [node id]: run exactly these (the gate's re-runs)
VEC_ISA_MEMO = "TORCH_TEST_VEC_ISA_MEMO"  # inductor's ISA probes' memo, or "off" (vec_isa_memo.py)
SHOW_PLACEMENT = (
    "TORCH_TEST_SHOW_PLACEMENT"  # "1": the log lists each case's variant (placement.py)
)
# Read by repository rules (envvars.bzl's HOST_ENV); the gate and bench/ set them.
GPUS = "TORCH_TEST_GPUS"  # overrides the detected GPU count
PYTHON = "TORCH_TEST_PYTHON"  # host-interpreter mode: the tests' Python
LOCK = "TORCH_TEST_LOCK"  # another lock than the pinned one
LOCK_SHA256 = "TORCH_TEST_LOCK_SHA256"  # its digest (tools/bazel)
ENV_FINGERPRINT = "TORCH_TEST_ENV_FINGERPRINT"  # host mode's environment digest
INTERPRETER_FINGERPRINT = "TORCH_TEST_INTERPRETER_FINGERPRINT"  # pinned mode's interpreter digest

# The names above: what the Starlark twin must agree with.
NAMES = {
    name: value
    for name, value in dict(globals()).items()
    if name != "PREFIX" and isinstance(value, str) and value.startswith(PREFIX)
}


def encode(value) -> str:
    """JSON as Starlark's json.encode writes it (no spaces)."""
    return json.dumps(value, separators=(",", ":"))


def decode(text: str):
    return json.loads(text)
