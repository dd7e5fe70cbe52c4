"""Facts recorded per target (tools/test_times.bzl), handed to each target through its environment.

  TORCH_TEST_DURATIONS     JSON, pytest node id -> seconds: the runner packs shards
                           longest-first from it (tools/runner/session/sharding.py), and a
                           long case budgets CPU threads for the tests expected beside it
                           (tools/runner/session/threads.py).
  TORCH_TEST_GPU_PEAK_MIB  peak GPU memory per GPU of the target's processes, as the runner
                           measured it (tools/runner/gpu_watch.py): the runner lets it share a
                           GPU only if that fits (tools/runner/gpu_share.py). GPU variants; a
                           peak of 0 (a probe that uses no GPU memory) shares too.

Only targets whose behaviour a fact changes get it, so facts stay out of other targets' cache
keys: regenerating tools/test_times.bzl with unchanged numbers re-runs nothing, and a changed
number re-runs only its target (tools/selftest/check_cache.py checks both).
"""

load("//tools:test_times.bzl", "GPU_PEAK_MIB", "TEST_TIMES")
load("//tools/hardware:envvars.bzl", "RUNNER_ENV")
load(":variants.bzl", "VARIANTS")

def recorded_env(target, variant):
    """The environment entries above that apply to one target.

    Args:
      target: the target's name in the current package.
      variant: its hardware variant ("cpu", "gpu", "multi_gpu").

    Returns:
      A dict of environment variables, empty when nothing recorded applies.
    """
    label = "//{}:{}".format(native.package_name(), target)
    env = {}
    times = TEST_TIMES.get(label)
    if times:
        env[RUNNER_ENV["DURATIONS"]] = json.encode(times)
    peak = GPU_PEAK_MIB.get(label)
    if peak != None and VARIANTS[variant]["gpus"]:
        env[RUNNER_ENV["GPU_PEAK_MIB"]] = str(peak)
    return env
