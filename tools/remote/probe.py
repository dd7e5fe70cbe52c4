"""Routing probe for the remote rig: one test per variant of the table, each saying where it ran.

Its targets are ordinary torch_test targets (one per variant, see BUILD.bazel), so routing is
proven on the macro itself. No torch (its ~21k-file runfiles tree would dominate the check) and
no CUDA: the rig's GPU-pool worker has no GPUs and simulates them (check_remote.sh passes
--test_env=TORCH_TEST_HOST_GPUS). The working directory names the worker that ran it
(tools/remote/rig.sh gives each worker its own directory).
"""

import os
import socket

from tools.hardware import variants
from tools.runner.session import markers


def _probe():
    print("variant", variants.current_variant())
    print("gpus", os.environ.get("CUDA_VISIBLE_DEVICES", "-"))
    print("host", socket.gethostname())
    print("cwd", os.getcwd())


def _probe_test(gpus: int):
    @markers.requires_gpus(gpus)
    def test():
        _probe()

    return test


# One test per variant, placed there by its GPU count: a new variant gets a probe by itself.
for _name, _gpus in variants.VARIANTS.items():
    globals()[f"test_{_name}"] = _probe_test(_gpus)
