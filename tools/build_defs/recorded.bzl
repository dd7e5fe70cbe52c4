"""Facts recorded per target (tools/test_times.bzl), handed to each target in a runfile.

  durations     pytest node id -> seconds: the runner packs shards longest-first from them
                (tools/runner/session/sharding.py), and a long case budgets CPU threads for
                the tests expected beside it (tools/runner/session/threads.py).
  gpu_peak_mib  peak GPU memory per GPU of the target's processes, as the runner measured it
                (tools/runner/gpu_watch.py): the runner lets it share a GPU only if that fits
                (tools/runner/gpu_share.py). GPU variants; a peak of 0 (a probe that uses no
                GPU memory) shares too.

A target with facts recorded gets them as a JSON file of its own, generated here
(`<target>.recorded.json`, a runfile), whose path its spec names (`recorded`,
tools/hardware/spec.py): thousands of cases, as a packed upstream target records, do not fit
the one environment string the spec is (Linux holds 128 KiB). Only targets whose behaviour a
fact changes get a file, and each only its own, so facts stay out of other targets' inputs:
regenerating tools/test_times.bzl with unchanged numbers writes the same bytes and re-runs
nothing, and a changed number re-runs only its target (tools/selftest/check_cache.py checks
both).
"""

load("//tools:test_times.bzl", "GPU_PEAK_MIB", "TEST_TIMES")
load(":variants.bzl", "VARIANTS")

def _recorded_json_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".json")
    ctx.actions.write(out, ctx.attr.content)
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

_recorded_json = rule(
    implementation = _recorded_json_impl,
    attrs = {"content": attr.string(mandatory = True)},
    doc = "One target's recorded facts, as a JSON file (the spec's `recorded`).",
)

def recorded_runfile(target, variant, **kwargs):
    """Declares the target's recorded facts' file, if anything recorded applies.

    Args:
      target: the test target's name in the current package.
      variant: its hardware variant ("cpu", "gpu", "multi_gpu").
      **kwargs: passed to the rule (e.g. tags, testonly).

    Returns:
      (label of the file's rule, its runfiles path), or (None, None) with nothing recorded.
    """
    label = "//{}:{}".format(native.package_name(), target)
    durations = TEST_TIMES.get(label, {})
    peak = GPU_PEAK_MIB.get(label) if VARIANTS[variant]["gpus"] else None
    if not durations and peak == None:
        return None, None
    name = target + ".recorded"
    _recorded_json(
        name = name,
        content = json.encode({"durations": durations, "gpu_peak_mib": peak}),
        visibility = ["//visibility:private"],
        **kwargs
    )
    package = native.package_name()
    return ":" + name, (package + "/" if package else "") + name + ".json"
