"""Self-tests of the GPU-sharing policy (tools/runner/gpu_share.py)."""

import pytest

from tools.hardware.spec import Spec
from tools.runner import gpu_share

H100_MIB = 81559


@pytest.mark.parametrize(
    "peak, each",
    [
        ("100", 1),  # ~1.1 GiB with the margin: one slot, beside anything
        ("4000", 2),
        ("10080", 3),  # test_dynamo_distributed_gpu's H100 record: ~13.6 GiB
        ("40000", 11),
    ],
)
def test_a_recorded_peak_takes_the_slots_its_memory_needs(peak, each):
    decision = gpu_share.decide(Spec(gpu_peak_mib=int(peak)), {}, lambda: H100_MIB)
    assert (decision.slots_per_gpu, decision.slots_each) == (gpu_share.DEFAULT_SLOTS, each)
    assert decision.shared
    # The memory cap the test's processes apply (its slots / the slots) covers the need.
    fraction = decision.memory_fraction
    assert fraction == decision.fraction
    assert decision.fraction == decision.slots_each / decision.slots_per_gpu
    assert H100_MIB * fraction >= int(peak) * gpu_share.MARGIN + gpu_share.CONTEXT_MIB


def test_a_small_test_holds_little_more_than_it_needs():
    # Slots are memory: a ~1 GiB test must not hold a tenth of an H100 while others wait.
    decision = gpu_share.decide(Spec(gpu_peak_mib=100), {}, lambda: H100_MIB)
    assert H100_MIB * decision.slots_each / decision.slots_per_gpu < 6 * 1024


@pytest.mark.parametrize(
    "target, memory, reason",
    [
        (Spec(), H100_MIB, "no peak"),
        (Spec(gpu_peak_mib=62000), H100_MIB, "every slot"),
        (Spec(gpu_peak_mib=100, whole_gpu=True), H100_MIB, "whole"),
        (Spec(gpu_peak_mib=100), None, "unknown"),
    ],
)
def test_anything_not_known_to_fit_takes_whole_gpus(target, memory, reason):
    decision = gpu_share.decide(target, {}, lambda: memory)
    assert not decision.shared
    assert decision.slots_each == decision.slots_per_gpu == gpu_share.DEFAULT_SLOTS
    assert reason in decision.reason
    assert decision.memory_fraction is None  # its GPUs are its own: no cap


def test_a_shared_request_is_never_patient():
    decision = gpu_share.decide(Spec(gpu_peak_mib=100), {}, lambda: H100_MIB)
    assert decision.shared and decision.patience(300.0) == 0.0


def test_explicit_slots_share_everything_but_declared_whole_targets():
    three = {"TORCH_TEST_SLOTS_PER_GPU": "3"}
    assert gpu_share.decide(Spec(), three, lambda: None).slots_each == 1
    assert gpu_share.decide(Spec(whole_gpu=True), three, lambda: None).slots_each == 3


def test_gpu_memory_is_asked_only_when_a_peak_could_share():
    # The memory query is an nvidia-smi call: tests that take whole GPUs anyway skip it.
    def unasked():
        raise AssertionError("GPU memory asked")

    for target, env in (
        (Spec(), {}),
        (Spec(whole_gpu=True), {}),
        (Spec(gpu_peak_mib=100), {"TORCH_TEST_SLOTS_PER_GPU": "2"}),
    ):
        gpu_share.decide(target, env, unasked)


@pytest.mark.parametrize(
    "target, env, patience",
    [
        # Recorded seconds: it waits on shared tests no longer than it will hold its GPUs.
        (Spec(durations={"a": 3.0, "b": 5.0}), {}, 8.0),
        # A shard's share of them, as sharding.py packs the shards evenly.
        (Spec(durations={"a": 3.0, "b": 5.0}), {"TEST_TOTAL_SHARDS": "2"}, 4.0),
        # A probe of no recorded seconds reserves its GPUs at once.
        (Spec(durations={"probe": 0.0}), {}, 0.0),
        # Not recorded yet: a share of its timeout (here 300 s: 30 s).
        (Spec(), {"TEST_TIMEOUT": "300"}, 300 * gpu_share.UNRECORDED_SHARE),
        # Nothing known (bazel run): a share of its wait.
        (Spec(), {}, 200.0 * gpu_share.UNRECORDED_SHARE),
        # A long test: at most half its wait, as before.
        (Spec(durations={"long": 900.0}), {}, 200.0 * gpu_share.WHOLE_PATIENCE),
    ],
)
def test_a_whole_request_waits_on_shared_ones_at_most_its_expected_run_time(target, env, patience):
    decision = gpu_share.decide(target, env, lambda: H100_MIB)  # no peak: whole GPUs
    assert not decision.shared
    assert decision.patience(200.0) == pytest.approx(patience)
