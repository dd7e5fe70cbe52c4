"""Every TORCH_TEST_* variable: the one definition, for Starlark and Python alike.

KNOBS are what users and self-tests set for a test (--test_env), HOST_ENV what repository rules
read (--repo_env): each a named variable with its one-line doc. PLUMBING is not for users: the
two channels through which torch_test hands facts to a test's processes, each one value whose
schema and one reader are tools/hardware/spec.py. tools/hardware/envvars.py reads this file's
literals with Python's ast and serves them as envvars.SPEC, ...: keep every assignment below a
plain literal.
"""

# The channels from torch_test to a test's processes (tools/hardware/spec.py writes and reads
# both; no other module reads them).
PLUMBING = {
    "SPEC": "TORCH_TEST_SPEC",  # the macro's static facts of the target, JSON (spec.Spec)
    "RUNTIME": "TORCH_TEST_RUNTIME",  # the runner's record for the processes it starts: its path (spec.Runtime)
}

# Set by users or self-tests (--test_env).
KNOBS = {
    "GPU_LEASE_DIR": "TORCH_TEST_GPU_LEASE_DIR",  # the GPU lease's lock directory
    "JOBS_DIR": "TORCH_TEST_JOBS_DIR",  # the thread budget's registry of running tests
    "THREAD_FORECAST": "TORCH_TEST_THREAD_FORECAST",  # "off": budget by the tests running now
    "SLOTS_PER_GPU": "TORCH_TEST_SLOTS_PER_GPU",  # overrides the GPU sharing policy
    "START_METHOD": "TORCH_TEST_START_METHOD",  # rank processes: "forkserver" or "spawn"
    "NODE_IDS": "TORCH_TEST_NODE_IDS",  # JSON [node id]: run exactly these (the gate's re-runs)
    "VEC_ISA_MEMO": "TORCH_TEST_VEC_ISA_MEMO",  # inductor's ISA probes' memo, or "off"
    "SHOW_PLACEMENT": "TORCH_TEST_SHOW_PLACEMENT",  # "1": the log lists each case's variant
    "HOST_GPUS": "TORCH_TEST_HOST_GPUS",  # the host's GPU count instead of nvidia-smi's (the rig's simulated hosts)
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
