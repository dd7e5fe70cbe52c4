"""Self-tests of shard assignment (tools/runner/session/sharding.py)."""

from tools.hardware.spec import Spec
from tools.runner.session import sharding

IDS = [f"t::test_{i:02d}" for i in range(10)]


def test_round_robin_without_durations_is_a_partition():
    shards = sharding.assign(IDS, 3, {})
    assert sorted(sum(shards, [])) == sorted(IDS)
    assert [len(s) for s in shards] == [4, 3, 3]


def test_longest_first_packing_balances_known_durations():
    durations = {"a": 60.0, "b": 20.0, "c": 20.0, "d": 10.0, "e": 10.0}
    shards = sharding.assign(list(durations), 2, durations)
    loads = sorted(sum(durations[n] for n in shard) for shard in shards)
    assert loads == [60.0, 60.0]
    assert ["a"] in shards  # the heavy test gets a shard of its own


def test_unknown_tests_are_dealt_after_known_ones():
    durations = {"slow": 30.0}
    shards = sharding.assign(["slow", "x", "y", "z"], 2, durations)
    assert sorted(sum(shards, [])) == ["slow", "x", "y", "z"]
    assert "slow" in shards[0]


def test_unknown_tests_go_to_the_least_loaded_shard():
    # A test with no record yet (new, or added since the last recording) must not be dealt
    # beside the longest one: on the H100 an unrecorded 53 s test would have joined a 43 s one.
    shards = sharding.assign(["slow", "x", "y", "z"], 2, {"slow": 30.0})
    assert shards == [["slow"], ["x", "y", "z"]]


def test_assignment_is_deterministic():
    durations = {n: float(i % 3) for i, n in enumerate(IDS)}
    assert sharding.assign(IDS, 4, durations) == sharding.assign(list(reversed(IDS)), 4, durations)


def test_durations_come_from_the_targets_spec(tmp_path):
    env = Spec(durations={"x": 2, "y": 3.5}).env(tmp_path)
    assert sharding.load_durations(env) == {"x": 2.0, "y": 3.5}
    assert sharding.load_durations({}) == {}
