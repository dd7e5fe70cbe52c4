"""Every TORCH_TEST_* variable: the one definition, for Starlark and Python alike.

RUNNER_ENV holds what the macro hands the runner and its tests, HOST_ENV what repository rules
read (--repo_env). tools/hardware/envvars.py reads this file's literals with Python's ast and
serves them as envvars.VARIANT, ...: keep every assignment below a plain literal. Structured
values are json.encode()d.
"""

RUNNER_ENV = {
    # Set by the torch_test macro (tools/build_defs/torch_test.bzl) for every target.
    "VARIANT": "TORCH_TEST_VARIANT",  # this target's variant
    "VARIANTS": "TORCH_TEST_VARIANTS",  # JSON [[variant, GPUs]], in the table's order
    "DECLARED_VARIANTS": "TORCH_TEST_DECLARED_VARIANTS",  # JSON [variant]: the source's targets
    "DECLARED_FEATURES": "TORCH_TEST_DECLARED_FEATURES",  # JSON {variant: [feature]}
    "WHOLE_GPU": "TORCH_TEST_WHOLE_GPU",  # "1": never share a GPU (tools/runner/gpu_share.py)
    "EXPECTATIONS": "TORCH_TEST_EXPECTATIONS",  # the declared-outcomes file (tools/runner/session/expectations.py)
    # Recorded per target (tools/build_defs/recorded.bzl).
    "DURATIONS": "TORCH_TEST_DURATIONS",  # JSON {node id: seconds}
    "GPU_PEAK_MIB": "TORCH_TEST_GPU_PEAK_MIB",  # peak GPU memory per GPU of the test's processes
    # Set by the runner for the processes it starts.
    "DEADLINE": "TORCH_TEST_DEADLINE",  # epoch seconds by which harness timeouts must have fired
    "HOST_GPUS": "TORCH_TEST_HOST_GPUS",  # this host's GPU count once probed (the rig sets it too)
    "GPU_MEMORY_FRACTION": "TORCH_TEST_GPU_MEMORY_FRACTION",  # this test's share of its GPUs
    "WITNESS": "TORCH_TEST_WITNESS",  # the runner's socket for what test bodies did (tools/runner/process/witness.py)
    # Set by users or self-tests (--test_env).
    "GPU_LEASE_DIR": "TORCH_TEST_GPU_LEASE_DIR",  # the GPU lease's lock directory
    "JOBS_DIR": "TORCH_TEST_JOBS_DIR",  # the thread budget's registry of running tests
    "THREAD_FORECAST": "TORCH_TEST_THREAD_FORECAST",  # "off": budget by the tests running now
    "SLOTS_PER_GPU": "TORCH_TEST_SLOTS_PER_GPU",  # overrides the GPU sharing policy
    "START_METHOD": "TORCH_TEST_START_METHOD",  # rank processes: "forkserver" or "spawn"
    "NODE_IDS": "TORCH_TEST_NODE_IDS",  # JSON [node id]: run exactly these (the gate's re-runs)
    "VEC_ISA_MEMO": "TORCH_TEST_VEC_ISA_MEMO",  # inductor's ISA probes' memo, or "off"
    "SHOW_PLACEMENT": "TORCH_TEST_SHOW_PLACEMENT",  # "1": the log lists each case's variant
}

# What repository rules read (host_hardware.bzl, tools/python/pypi.bzl), set by users,
# tools/bazel and the gate.
HOST_ENV = {
    "GPUS": "TORCH_TEST_GPUS",  # overrides the detected GPU count
    "CPU_ONLY": "TORCH_TEST_CPU_ONLY",  # "1": CPU variants asked for (tools/bazel, --config=cpu)
    "PYTHON": "TORCH_TEST_PYTHON",  # host-interpreter mode: the tests' Python
    "LOCK": "TORCH_TEST_LOCK",  # another lock than the pinned one
    "LOCK_SHA256": "TORCH_TEST_LOCK_SHA256",  # its digest (tools/bazel)
    "ENV_FINGERPRINT": "TORCH_TEST_ENV_FINGERPRINT",  # host mode's environment digest
    "INTERPRETER_FINGERPRINT": "TORCH_TEST_INTERPRETER_FINGERPRINT",  # pinned mode's interpreter
}

# Every test process (torch_test's targets, and bench/'s plain pytest runs: bench/plain_env.py):
# no network access to model hubs; no bytecode written, unless the runner gives its tests a
# shared bytecode cache (tools/runner/bytecode.py).
COMMON_ENV = {
    "HF_HUB_OFFLINE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}

# The prefix torch_test keeps for itself and its runner (a target's env may not set one).
PREFIX = "TORCH_TEST_"

def feature_override(feature):
    """The --repo_env variable that forces a feature of the table on or off (TORCH_TEST_NCCL)."""
    return PREFIX + feature.upper()
