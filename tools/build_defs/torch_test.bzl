"""`torch_test`: one test source (or an opt-in pack of several), one Bazel target per variant.

    torch_test(
        name = "test_embedding_ops",          # source: test_embedding_ops.py
        variants = ["cpu", "multi_gpu"],
        nccl = ["multi_gpu"],                 # variants whose tests are marked @requires_nccl
        shard_count = {"cpu": 2},             # int (every variant) or per-variant dict
        deps = ["@pypi//:torch"],
    )

creates (variants, suffixes, GPU counts, tags, pools: the table in variants.bzl)

    target                       variant    tags                    needs (target_compatible_with)
    test_embedding_ops           cpu        -                       -
    test_embedding_ops_multi_gpu multi_gpu  gpu multi_gpu nccl      has_gpus_2 has_nccl

Inside the source, test_utils.hardware markers place each test in one variant; the runner
(//tools/runner:pytest_runner.py) leases exactly the variant's GPUs and fails if the host lacks
them. Targets whose hardware the platform lacks are SKIPPED by Bazel. `nccl` / `triton` (or
`features = {"nccl": [...]}`, for any feature of the table) must name exactly the variants
whose tests carry @requires_nccl / @requires_triton: the pytest
plugin fails collection otherwise (Starlark cannot read the markers, so this is checked, not
derived). Per variant the target also gets its pool (pools.bzl) and its spec: every static fact
its runner and tests read, one environment entry (tools/hardware/spec.py), which names the
runfile of its recorded durations and GPU peak, if any (recorded.bzl).

Declarations that contradict each other fail at loading time with a message naming them.
"""

load("//tools/hardware:envvars.bzl", "COMMON_ENV", "PLUMBING", "PREFIX")
load(":pools.bzl", "exec_properties_for")
load(":python.bzl", "py_test")
load(":recorded.bzl", "recorded_runfile")
load(":variants.bzl", "FEATURES", "VARIANTS", "gpu_constraint", "tag_filter")

_PLATFORMS = "//tools/platforms:"

RUNNER = "//tools/runner:pytest_runner.py"

# The runner and the plugin it loads (tools.runner.session.plugin), in every target.
RUNNER_DEPS = ["//tools/runner"]

# What tools/hardware/variants.py needs of the table: each variant's GPU count. Passed in the
# spec rather than as a file, so editing a pool or timeout re-runs nothing.
# Pairs, not an object: json.encode sorts an object's keys, and the table's order is kept.
_VARIANT_GPUS = [[v, VARIANTS[v]["gpus"]] for v in VARIANTS]

# One environment string holds at most MAX_ARG_STRLEN (128 KiB) on Linux, or the test's exec
# fails (E2BIG) before the runner can say why. A quarter of it: len() counts characters, and
# one may take up to 4 bytes.
_ENV_ENTRY_LIMIT = 32 * 1024

def _fail(name, message):
    fail("torch_test(name = \"{}\"): {}".format(name, message))

def _unknown(values, known):
    return [v for v in values if v not in known]

# List arguments that may also be a select().
_SELECTABLE = ["args", "data", "deps"]

def _check(name, variants, features, shard_count, lists = {}, env = {}):
    for arg, value in lists.items():
        if type(value) != "list" and not (type(value) == "select" and arg in _SELECTABLE):
            _fail(name, "{} must be a list, got the {} {}; write [{}]".format(
                arg,
                type(value),
                repr(value),
                repr(value),
            ))
    if not variants:
        _fail(name, "variants is empty; use any of {}".format(VARIANTS.keys()))
    bad = _unknown(variants, VARIANTS)
    if bad:
        _fail(name, "unknown variants {}; known: {}".format(bad, VARIANTS.keys()))
    if len(variants) != len({v: None for v in variants}):
        _fail(name, "variants {} lists a variant twice".format(variants))
    bad = _unknown(features.keys(), FEATURES)
    if bad:
        _fail(name, "features names {}; the table's features are {}".format(bad, FEATURES.keys()))
    for feature, listed in features.items():
        if type(listed) != "list":
            _fail(name, "features[{}] must be a list of variants, got {}".format(repr(feature), repr(listed)))
        gpuless = [v for v in listed if v in VARIANTS and not VARIANTS[v]["gpus"]]
        if gpuless:
            _fail(name, "{} lists the {} variant; {} needs GPUs".format(feature, " and ".join(gpuless), feature))
        bad = _unknown(listed, variants)
        if bad:
            _fail(name, "{} names {}, which are not among variants {}".format(feature, bad, variants))
    if type(shard_count) == "dict":
        bad = _unknown(shard_count.keys(), variants)
        if bad:
            _fail(name, "shard_count names {}, which are not among variants {}".format(bad, variants))
    bad = sorted([k for k in env if k.startswith(PREFIX)])
    if bad:
        _fail(name, "env sets {}; TORCH_TEST_* variables belong to torch_test and its runner".format(bad))

    # A second torch_test of the same name, even with other variants: its targets would
    # declare a different variant set for the same source (the spec's declared_variants).
    for spec in VARIANTS.values():
        earlier = native.existing_rule(name + spec["suffix"])
        if earlier and earlier.get("generator_function") == "torch_test" and earlier.get("generator_name") == name:
            _fail(name, "declared twice: target {} already exists in this package".format(name + spec["suffix"]))

def _dirname(path):
    return path.rpartition("/")[0]

def _check_no_source_directories(name, data):
    """Fails on a source directory of this package in `data`.

    Bazel 4.2.3 keys a source directory by the directory alone (a warning says "dependency
    checking of directories is unsound"): an edit of a file inside keeps a cached PASSED.
    Labels of other packages cannot be globbed from here; the runner's view of the source tree
    (tools/runner/source_view.py) still holds no file that no input declares.
    """
    if type(data) != "list":
        return  # a select(): its branches are labels resolved later
    for label in data:
        if label.startswith("@") or label.startswith("//"):
            continue
        path = label[1:] if label.startswith(":") else label
        if not path or native.existing_rule(path):
            continue
        is_file = native.glob([path], allow_empty = True)
        is_entry = native.glob([path], exclude_directories = 0, allow_empty = True)
        if is_entry and not is_file:
            _fail(name, "data names the source directory {}: Bazel tracks only the directory, not the files in it (an edit inside keeps the cached result); use glob([\"{}/**\"])".format(
                repr(label),
                path.rstrip("/"),
            ))

def _expectations_path(name, src, expectations):
    """The declared-outcomes file's runfiles path, checked; None without one."""
    if expectations == None:
        return None
    if type(expectations) != "string":
        _fail(name, "expectations must be a file name, got the {} {}".format(type(expectations), repr(expectations)))
    if ":" in expectations or expectations.startswith("@"):
        _fail(name, "expectations = {} must be a file beside {} (e.g. \"{}\"), not a label".format(
            repr(expectations),
            src,
            src[:-len(".py")] + ".expectations.toml",
        ))
    if _dirname(expectations) != _dirname(src):
        _fail(name, "expectations file {} is not beside its source {}".format(expectations, src))
    if not expectations.endswith(".toml"):
        _fail(name, "expectations file {} must be TOML (.toml)".format(expectations))
    if not native.glob([expectations], allow_empty = True):
        _fail(name, "expectations file {} does not exist in package {}".format(expectations, native.package_name()))
    package = native.package_name()
    return package + "/" + expectations if package else expectations

def _features(features, by_argument):
    """`features` with the `nccl` / `triton` arguments added (each feature's variants)."""
    merged = dict(features)
    for feature, listed in by_argument.items():
        if listed and type(listed) == "list":  # _check names any other type
            merged[feature] = merged.get(feature, []) + listed
    return merged

def _with_runner(deps):
    if type(deps) == "list":  # a source that imports the markers lists //test_utils:hardware too
        return RUNNER_DEPS + [d for d in deps if d not in RUNNER_DEPS]
    return RUNNER_DEPS + deps

def _shell_quoted(arg):
    """`arg` as one word after Bazel's Bourne-shell tokenization of test args.

    Bazel splits each string of a test's `args` on spaces, so `["-k", "not hf_bert"]` would
    reach pytest as `-k not hf_bert`; quoted, it arrives as written. $(location) still expands
    inside the quotes.
    """
    return "'" + arg.replace("'", "'\\''") + "'"

def _check_env_size(name, target, env):
    for key, value in env.items():
        if type(value) == "string" and len(key) + 1 + len(value) > _ENV_ENTRY_LIMIT:
            _fail(name, "{}'s environment entry {} is {} characters; one entry must stay under {} (Linux's MAX_ARG_STRLEN is 128 KiB, or the test cannot start): pass large values as a file in data".format(
                target,
                key,
                len(key) + 1 + len(value),
                _ENV_ENTRY_LIMIT,
            ))

def _shards(shard_count, variant):
    if type(shard_count) == "dict":
        return shard_count.get(variant)
    return shard_count

def torch_test(
        name,
        src = None,
        srcs = None,
        variants = ["cpu"],
        nccl = [],
        triton = [],
        features = {},
        shard_count = None,
        size = "medium",
        timeout = None,
        deps = [],
        data = [],
        env = {},
        whole_gpu = False,
        tags = [],
        args = [],
        expectations = None,
        **kwargs):
    """One py_test per variant of `src`; see the module docstring.

    Args:
      name: the cpu target's name; other variants append their suffix (`_gpu`, ...).
      src: the test source (default `name + ".py"`).
      srcs: instead of src, several sources run by one pytest process per shard (opt-in
        packing of many small files: each process pays the interpreter start and torch's
        imports once, as a pytest-xdist worker does; every file's cases are still reported
        by node id). Shard it (shard_count) to spread the files' cases over processes.
      variants: any of the table's variants (variants.bzl): "cpu", "gpu", "multi_gpu", ...
      nccl: the variants whose tests are marked @requires_nccl (never "cpu").
      triton: the variants whose tests are marked @requires_triton (never "cpu").
      features: {feature: variants} for any feature of the table (variants.bzl FEATURES);
        `nccl = [...]` is `features = {"nccl": [...]}`.
      shard_count: an int for every variant, or a dict from variant to int.
      size: Bazel test size of every variant.
      timeout: Bazel timeout; default: the variant's (GPU variants may wait for the lease).
      deps: what the source imports (e.g. "//test_utils:dynamo", "@pypi//:torch"); the runner
        and its plugin (//tools/runner, which holds //tools/runner/session, and pytest) are implicit.
      data: runfiles of every variant.
      env: extra environment, applied over the variant's (no TORCH_TEST_* variable: those are
        the macro's and the runner's).
      whole_gpu: the GPU variants never share a GPU (tools/runner/gpu_share.py): for a test
        whose GPU memory the recorded peak does not bound.
      tags: extra tags of every variant.
      args: extra pytest arguments, each passed as written (`["-k", "not hf_bert"]`: no
        inner quotes; Bazel's word splitting does not apply).
      expectations: a TOML file beside `src` declaring tests expected to skip or fail, each with
        its reason (format: tools/runner/session/expectations.py); undeclared skips fail the target, and
        so do declarations that no longer hold.
      **kwargs: passed to every py_test (e.g. flaky).
    """
    features = _features(features, {"nccl": nccl, "triton": triton})
    _check(
        name,
        variants,
        features,
        shard_count,
        lists = {"args": args, "data": data, "srcs": srcs or [], "deps": deps, "nccl": nccl, "tags": tags, "triton": triton, "variants": variants},
        env = env,
    )
    _check_no_source_directories(name, data)
    if src and srcs:
        _fail(name, "give src or srcs, not both")
    if srcs != None and not srcs:
        _fail(name, "srcs is empty")
    sources = srcs or [src or name + ".py"]
    expectations_path = _expectations_path(name, sources[0], expectations)
    if expectations_path:
        data = data + [expectations]
    quoted_args = [_shell_quoted(a) for a in args] if type(args) == "list" else args

    # Every variant's features, for the pytest plugin's check against the markers.
    used_by = {v: [f for f in FEATURES if v in features.get(f, [])] for v in variants}
    for variant in variants:
        row = VARIANTS[variant]
        target = name + row["suffix"]
        if native.existing_rule(target):
            _fail(name, "target {} already exists in this package".format(target))
        used = used_by[variant]
        needs = ([gpu_constraint(row["gpus"])] if row["gpus"] else []) + [FEATURES[f]["constraint"] for f in used]

        # The target's static facts, one value: the fields of tools/hardware/spec.py's Spec,
        # the recorded ones in a runfile of the target's own.
        recorded, recorded_path = recorded_runfile(target, variant)
        facts = {
            "variant": variant,
            "variants": _VARIANT_GPUS,
            "declared_variants": variants,
            "declared_features": used_by,
            "whole_gpu": bool(whole_gpu and row["gpus"]),
            "expectations": expectations_path,
            "cached": "external" not in row["tags"] + tags,
            "recorded": recorded_path,
        }
        variant_env = dict(COMMON_ENV)
        variant_env.update(row["env"])
        variant_env[PLUMBING["SPEC"]] = json.encode(facts)
        variant_env.update(env)
        _check_env_size(name, target, variant_env)
        py_test(
            name = target,
            srcs = [RUNNER] + sources,
            main = RUNNER,
            args = ["$(location {})".format(s) for s in sources] + quoted_args,
            data = data + ([recorded] if recorded else []),
            deps = _with_runner(deps),
            env = variant_env,
            exec_properties = exec_properties_for(variant),
            python_version = "PY3",
            shard_count = _shards(shard_count, variant),
            size = size,
            timeout = timeout or row["timeout"],
            tags = row["tags"] + [FEATURES[f]["tag"] for f in used] + tags,
            target_compatible_with = [_PLATFORMS + n for n in needs],
            **kwargs
        )

# buildifier: disable=unnamed-macro
def torch_test_suites():
    """One test_suite per variant in this package: cpu_tests, gpu_tests, multi_gpu_tests, ...

    Over the whole repository, select a variant with its config (`--config=cpu //...`): Bazel
    4.2.3 cannot enumerate packages while loading, so a root suite would have to list them.
    """
    for variant in VARIANTS:
        native.test_suite(name = variant + "_tests", tags = tag_filter(variant).split(","))
