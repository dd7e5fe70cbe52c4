"""Facts recorded per target (tools/test_times.bzl), handed to each target in its spec.

  durations     pytest node id -> seconds: the runner packs shards longest-first from them
                (tools/runner/session/sharding.py), and a long case budgets CPU threads for
                the tests expected beside it (tools/runner/session/threads.py).
  gpu_peak_mib  peak GPU memory per GPU of the target's processes, as the runner measured it
                (tools/runner/gpu_watch.py): the runner lets it share a GPU only if that fits
                (tools/runner/gpu_share.py). GPU variants; a peak of 0 (a probe that uses no
                GPU memory) shares too.

Only targets whose behaviour a fact changes get it, so facts stay out of other targets' cache
keys (the spec, tools/hardware/spec.py, is part of the target's environment): regenerating
tools/test_times.bzl with unchanged numbers re-runs nothing, and a changed number re-runs only
its target (tools/selftest/check_cache.py checks both).
"""

load("//tools:test_times.bzl", "GPU_PEAK_MIB", "TEST_TIMES")
load(":variants.bzl", "VARIANTS")

def recorded_facts(target, variant):
    """The spec fields above of one target.

    Args:
      target: the target's name in the current package.
      variant: its hardware variant ("cpu", "gpu", "multi_gpu").

    Returns:
      {"durations": {node id: seconds}, "gpu_peak_mib": MiB or None}, empty and None when
      nothing recorded applies.
    """
    label = "//{}:{}".format(native.package_name(), target)
    peak = GPU_PEAK_MIB.get(label)
    return {
        "durations": TEST_TIMES.get(label, {}),
        "gpu_peak_mib": peak if VARIANTS[variant]["gpus"] else None,
    }
