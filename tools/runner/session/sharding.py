"""Which tests a Bazel shard runs: deterministic, every test in exactly one shard.

With recorded durations (the spec's durations: this target's entry of tools/test_times.bzl,
from tools/build_defs/recorded.bzl) tests are packed greedily, longest first, onto the
least-loaded shard; tests without a record follow, each counted as UNKNOWN_DURATION, also onto
the least-loaded shard (so a new test does not land beside the longest one; with no records at
all this is round-robin). Ties break on node id, so a given file always yields the same split.
"""

import heapq
import os

from tools.hardware import spec

# Seconds assumed for a test missing from the durations.
UNKNOWN_DURATION = 1.0


def assign(node_ids: list[str], total_shards: int, durations: dict[str, float]) -> list[list[str]]:
    """Split node ids into `total_shards` lists (longest-first packing when durations known)."""
    if total_shards < 1:
        raise ValueError(f"total_shards must be >= 1, got {total_shards}")
    shards: list[list[str]] = [[] for _ in range(total_shards)]
    known = sorted((n for n in node_ids if n in durations), key=lambda n: (-durations[n], n))
    unknown = sorted(n for n in node_ids if n not in durations)
    loads = [(0.0, index) for index in range(total_shards)]
    heapq.heapify(loads)
    for node_id in known + unknown:
        load, index = heapq.heappop(loads)
        shards[index].append(node_id)
        heapq.heappush(loads, (load + durations.get(node_id, UNKNOWN_DURATION), index))
    return shards


def load_durations(env) -> dict[str, float]:
    """Per-test seconds recorded for this target (tools/hardware/spec.py), or {} if none."""
    return spec.spec(env).durations


class ShardSelector:
    """pytest plugin: keeps this shard's tests after variant selection and -k filtering."""

    def __init__(self, index: int, total: int, durations: dict[str, float]):
        self.index, self.total, self.durations = index, total, durations
        self.selected_before_sharding = 0
        self.elsewhere: list[str] = []  # node ids given to other shards

    @classmethod
    def from_env(cls, env=os.environ):
        total = int(env.get("TEST_TOTAL_SHARDS", "1"))
        index = int(env.get("TEST_SHARD_INDEX", "0"))
        if not 0 <= index < total:
            raise SystemExit(f"TEST_SHARD_INDEX={index} is outside 0..{total - 1}")
        return cls(index, total, load_durations(env))

    def recorded_seconds(self) -> float | None:
        """The recorded seconds of what the record puts in this shard, before collection."""
        if not self.durations:
            return None
        recorded = sorted(self.durations)
        return sum(
            self.durations[n] for n in assign(recorded, self.total, self.durations)[self.index]
        )

    def pytest_collection_modifyitems(self, config, items):
        self.selected_before_sharding = len(items)
        if self.total == 1:
            return
        mine = set(assign([i.nodeid for i in items], self.total, self.durations)[self.index])
        keep = [i for i in items if i.nodeid in mine]
        drop = [i for i in items if i.nodeid not in mine]
        self.elsewhere = [i.nodeid for i in drop]
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    # Runs after every other plugin's selection (variant, -k), so shards split what is left.
    pytest_collection_modifyitems.trylast = True
