"""Self-tests of the GPU-sharing policy (tools/runner/gpu_share.py)."""

import pytest

from tools.runner import gpu_share

H100_MIB = 81559


def test_a_recorded_peak_that_fits_in_a_share_shares():
    decision = gpu_share.decide({"TORCH_TEST_GPU_PEAK_MIB": "4000"}, lambda: H100_MIB)
    assert (decision.slots_per_gpu, decision.slots_each, decision.shared) == (2, 1, True)


@pytest.mark.parametrize(
    "env, memory, reason",
    [
        ({}, H100_MIB, "no peak"),
        ({"TORCH_TEST_GPU_PEAK_MIB": "40000"}, H100_MIB, "a share is"),
        ({"TORCH_TEST_GPU_PEAK_MIB": "100", "TORCH_TEST_WHOLE_GPU": "1"}, H100_MIB, "whole"),
        ({"TORCH_TEST_GPU_PEAK_MIB": "100"}, None, "unknown"),
    ],
)
def test_anything_not_known_to_fit_takes_whole_gpus(env, memory, reason):
    decision = gpu_share.decide(env, lambda: memory)
    assert not decision.shared
    assert decision.slots_each == decision.slots_per_gpu == gpu_share.DEFAULT_SLOTS
    assert reason in decision.reason


def test_explicit_slots_share_everything_but_declared_whole_targets():
    assert gpu_share.decide({"TORCH_TEST_SLOTS_PER_GPU": "3"}, lambda: None).slots_each == 1
    whole = {"TORCH_TEST_SLOTS_PER_GPU": "3", "TORCH_TEST_WHOLE_GPU": "1"}
    assert gpu_share.decide(whole, lambda: None).slots_each == 3


def test_gpu_memory_is_asked_only_when_a_peak_could_share():
    # The memory query is an nvidia-smi call: tests that take whole GPUs anyway skip it.
    def unasked():
        raise AssertionError("GPU memory asked")

    for env in ({}, {"TORCH_TEST_WHOLE_GPU": "1"}, {"TORCH_TEST_SLOTS_PER_GPU": "2"}):
        gpu_share.decide(env, unasked)
