"""Every TORCH_TEST_* variable, for Starlark: the twin of tools/hardware/envvars.py.

RUNNER_ENV holds what the macro hands the runner and its tests, HOST_ENV what repository rules
read (--repo_env); //test_utils/tests:test_hardware_table checks that the two together equal
envvars.py's NAMES (keep them plain literals, which Python reads). Structured values are
json.encode()d.
"""

RUNNER_ENV = {
    "VARIANT": "TORCH_TEST_VARIANT",
    "VARIANTS": "TORCH_TEST_VARIANTS",
    "DECLARED_VARIANTS": "TORCH_TEST_DECLARED_VARIANTS",
    "DECLARED_FEATURES": "TORCH_TEST_DECLARED_FEATURES",
    "WHOLE_GPU": "TORCH_TEST_WHOLE_GPU",
    "EXPECTATIONS": "TORCH_TEST_EXPECTATIONS",
    "DURATIONS": "TORCH_TEST_DURATIONS",
    "GPU_PEAK_MIB": "TORCH_TEST_GPU_PEAK_MIB",
    "DEADLINE": "TORCH_TEST_DEADLINE",
    "HOST_GPUS": "TORCH_TEST_HOST_GPUS",
    "GPU_MEMORY_FRACTION": "TORCH_TEST_GPU_MEMORY_FRACTION",
    "GPU_LEASE_DIR": "TORCH_TEST_GPU_LEASE_DIR",
    "JOBS_DIR": "TORCH_TEST_JOBS_DIR",
    "SLOTS_PER_GPU": "TORCH_TEST_SLOTS_PER_GPU",
    "START_METHOD": "TORCH_TEST_START_METHOD",
    "NODE_IDS": "TORCH_TEST_NODE_IDS",
    "VEC_ISA_MEMO": "TORCH_TEST_VEC_ISA_MEMO",
    "SHOW_PLACEMENT": "TORCH_TEST_SHOW_PLACEMENT",
}

# What repository rules read (host_hardware.bzl, tools/python/pypi.bzl), set by users,
# tools/bazel and the gate.
HOST_ENV = {
    "GPUS": "TORCH_TEST_GPUS",  # overrides the detected GPU count
    "PYTHON": "TORCH_TEST_PYTHON",  # host-interpreter mode: the tests' Python
    "LOCK": "TORCH_TEST_LOCK",  # another lock than the pinned one
    "LOCK_SHA256": "TORCH_TEST_LOCK_SHA256",  # its digest (tools/bazel)
    "ENV_FINGERPRINT": "TORCH_TEST_ENV_FINGERPRINT",  # host mode's environment digest
    "INTERPRETER_FINGERPRINT": "TORCH_TEST_INTERPRETER_FINGERPRINT",  # pinned mode's interpreter
}

# Every test process (torch_test's targets, and bench/'s plain pytest runs: bench/plain_env.py):
# no network access to model hubs; no bytecode written, unless the runner gives its tests a
# shared bytecode cache (tools/runner/bytecode.py). A plain literal: Python reads it.
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
