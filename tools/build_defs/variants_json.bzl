"""`variants_json`: the variant table as Starlark evaluates it, for the Python side's self-test.

tools/hardware/table.py reads variants.bzl's literals with Python's `ast`;
//test_utils/tests:test_hardware_table compares that reading with this file, plus what Starlark
derives from the table (tag filters, constraints a host offers).
"""

load(":variants.bzl", "FEATURES", "VARIANTS", "constraints_offered", "gpu_counts", "tag_filter")

def _variants_json_impl(ctx):
    derived = {
        "tag_filters": {v: tag_filter(v) for v in VARIANTS},
        "constraints_offered": {
            str(n): constraints_offered(n, FEATURES.keys())
            for n in [0] + gpu_counts()
        },
    }
    out = ctx.actions.declare_file(ctx.label.name + ".json")
    ctx.actions.write(out, json.encode({"VARIANTS": VARIANTS, "FEATURES": FEATURES, "derived": derived}))
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

variants_json = rule(implementation = _variants_json_impl)
