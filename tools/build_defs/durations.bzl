"""Recorded test durations, handed to each sharded target through its own environment.

The runner packs a target's shards longest-first from `TORCH_TEST_DURATIONS` (JSON: pytest node
id -> seconds; tools/runner/sharding.py). Only sharded targets get it: elsewhere durations
change nothing, so they stay out of the cache key, and a target's key changes only when its
own numbers do (tools/selftest/check_cache.sh checks both).
"""

load("//tools:test_times.bzl", "TEST_TIMES")

DURATIONS_ENV = "TORCH_TEST_DURATIONS"

def durations_env(target, shard_count):
    """{DURATIONS_ENV: json} for `target` (a name in the current package), or {}."""
    if not shard_count or shard_count < 2:
        return {}
    times = TEST_TIMES.get("//{}:{}".format(native.package_name(), target))
    if not times:
        return {}
    return {DURATIONS_ENV: json.encode(times)}
