"""`torch_test`: one test source, one Bazel target per hardware variant.

    torch_test(
        name = "test_embedding_ops",          # source: test_embedding_ops.py
        variants = ["cpu", "multi_gpu"],
        nccl = ["multi_gpu"],                 # variants that use the NCCL backend
        shard_count = {"cpu": 2},             # int (every variant) or per-variant dict
        deps = ["@pypi//:torch"],
    )

creates

    target                       variant    tags                    needs (target_compatible_with)
    test_embedding_ops           cpu        -                       -
    test_embedding_ops_gpu       gpu        gpu [nccl]              has_gpu [has_nccl]
    test_embedding_ops_multi_gpu multi_gpu  gpu multi_gpu [nccl]    has_gpu has_multi_gpu [has_nccl]

Inside the source, test_utils.hardware markers place each test in one variant; the runner
(//tools/runner:pytest_runner.py) runs the variant's tests and fails if the host lacks its
hardware. Targets whose hardware the platform lacks are SKIPPED by Bazel. Per variant the
target also gets the remote pool (pools.bzl) and, for GPU variants, the GPU fingerprint in its
environment, so cached GPU results are tied to the GPU model.

Declarations that contradict each other fail at loading time with a message naming them.
"""

load("@local_hardware//:hardware.bzl", "GPU_FINGERPRINT")
load(":pools.bzl", "exec_properties_for")
load(":python.bzl", "py_test")
load(":recorded.bzl", "recorded_env")

_PLATFORMS = "//tools/platforms:"

VARIANTS = {
    "cpu": struct(suffix = "", tags = [], needs = []),
    "gpu": struct(suffix = "_gpu", tags = ["gpu"], needs = ["has_gpu"]),
    "multi_gpu": struct(suffix = "_multi_gpu", tags = ["gpu", "multi_gpu"], needs = ["has_gpu", "has_multi_gpu"]),
}

# Every GPU test process: NVLink multicast off (unsupported on the pools' NVSwitch setup).
GPU_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "NVSHMEM_DISABLE_NVLS": "1",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
}

# Every test process: no network access to model hubs.
COMMON_ENV = {
    "HF_HUB_OFFLINE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}

RUNNER = "//tools/runner:pytest_runner.py"

# GPU variants may first wait for the GPU lease (tools/runner/gpu_lease.py) while other GPU
# tests run; that wait counts against Bazel's timeout, so their default timeout is longer.
_GPU_TIMEOUT = "long"

def _fail(name, message):
    fail("torch_test(name = \"{}\"): {}".format(name, message))

def _unknown(values, known):
    return [v for v in values if v not in known]

# List arguments that may also be a select().
_SELECTABLE = ["args", "data", "deps"]

def _check(name, variants, nccl, shard_count, lists = {}, env = {}):
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
    if "cpu" in nccl:
        _fail(name, "nccl lists the cpu variant; NCCL needs GPUs (use gloo on cpu)")
    bad = _unknown(nccl, variants)
    if bad:
        _fail(name, "nccl names {}, which are not among variants {}".format(bad, variants))
    if type(shard_count) == "dict":
        bad = _unknown(shard_count.keys(), variants)
        if bad:
            _fail(name, "shard_count names {}, which are not among variants {}".format(bad, variants))
    bad = sorted([k for k in env if k.startswith("TORCH_TEST_")])
    if bad:
        _fail(name, "env sets {}; TORCH_TEST_* variables belong to torch_test and its runner".format(bad))

    # A second torch_test of the same name, even with other variants: its targets would
    # declare a different variant set for the same source (TORCH_TEST_DECLARED_VARIANTS).
    for spec in VARIANTS.values():
        earlier = native.existing_rule(name + spec.suffix)
        if earlier and earlier.get("generator_function") == "torch_test" and earlier.get("generator_name") == name:
            _fail(name, "declared twice: target {} already exists in this package".format(name + spec.suffix))

def _shards(shard_count, variant):
    if type(shard_count) == "dict":
        return shard_count.get(variant)
    return shard_count

def torch_test(
        name,
        src = None,
        variants = ["cpu"],
        nccl = [],
        shard_count = None,
        size = "medium",
        timeout = None,
        deps = [],
        data = [],
        env = {},
        tags = [],
        args = [],
        **kwargs):
    """One py_test per variant of `src`; see the module docstring.

    Args:
      name: the cpu target's name; other variants append `_gpu` / `_multi_gpu`.
      src: the test source (default `name + ".py"`).
      variants: any of "cpu", "gpu", "multi_gpu".
      nccl: the variants that use the NCCL backend (never "cpu").
      shard_count: an int for every variant, or a dict from variant to int.
      size: Bazel test size of every variant.
      timeout: Bazel timeout; GPU variants default to "long" (they may wait for the lease).
      deps: what the source imports (e.g. "//test_utils:dynamo", "@pypi//:torch"); the runner
        (with //test_utils:hardware and pytest) is implicit.
      data: runfiles of every variant.
      env: extra environment, applied over the variant's.
      tags: extra tags of every variant.
      args: extra pytest arguments.
      **kwargs: passed to every py_test (e.g. flaky).
    """
    _check(
        name,
        variants,
        nccl,
        shard_count,
        lists = {"args": args, "data": data, "deps": deps, "nccl": nccl, "tags": tags, "variants": variants},
        env = env,
    )
    src = src or name + ".py"
    for variant in variants:
        spec = VARIANTS[variant]
        target = name + spec.suffix
        if native.existing_rule(target):
            _fail(name, "target {} already exists in this package".format(target))
        needs = spec.needs + (["has_nccl"] if variant in nccl else [])
        variant_env = dict(COMMON_ENV)
        variant_env["TORCH_TEST_VARIANT"] = variant
        variant_env["TORCH_TEST_DECLARED_VARIANTS"] = ",".join(variants)
        if variant != "cpu":
            variant_env.update(GPU_ENV)
            variant_env["TORCH_TEST_GPU_HARDWARE"] = GPU_FINGERPRINT
        variant_env.update(recorded_env(target, variant, _shards(shard_count, variant)))
        variant_env.update(env)
        py_test(
            name = target,
            srcs = [RUNNER, src],
            main = RUNNER,
            args = ["$(location {})".format(src)] + args,
            data = data,
            deps = ["//tools/runner"] + deps,
            env = variant_env,
            exec_properties = exec_properties_for(variant),
            python_version = "PY3",
            shard_count = _shards(shard_count, variant),
            size = size,
            timeout = timeout or (_GPU_TIMEOUT if variant != "cpu" else None),
            tags = spec.tags + (["nccl"] if variant in nccl else []) + tags,
            target_compatible_with = [_PLATFORMS + n for n in needs],
            **kwargs
        )

# buildifier: disable=unnamed-macro
def torch_test_suites():
    """Per-hardware test_suites of this package: cpu_tests, gpu_tests, multi_gpu_tests."""
    native.test_suite(name = "cpu_tests", tags = ["-gpu"])
    native.test_suite(name = "gpu_tests", tags = ["gpu", "-multi_gpu"])
    native.test_suite(name = "multi_gpu_tests", tags = ["multi_gpu"])
