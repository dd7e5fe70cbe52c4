"""The hardware variants: every hardware fact of the repository, in one table.

Everything else is derived from VARIANTS and FEATURES:
  torch_test.bzl        targets (name + suffix), tags, target_compatible_with, env, timeout
  pools.bzl             each variant's remote pool (exec properties)
  tools/platforms       one constraint per GPU count and feature; the remote platforms
  host_hardware.bzl     which of those constraints this host offers
  torch_test_suites()   one test_suite per variant (tag filters from tag_filter() below)
  .bazelrc              test:<variant> configs (checked by //test_utils/tests:test_hardware_table)
  test_utils/hardware   which variant a test's markers put it in, GPUs to lease (it reads this
                        file: keep VARIANTS, FEATURES, CPU_ENV and GPU_ENV plain literals and names)

Naming follows JAX/XLA (`gpu_h100x2`-style configs, one tag per count): "gpu" is one GPU;
"multi_gpu" (two GPUs) keeps its name so existing targets and README commands stay valid;
larger hosts are "gpu_x<N>" with target suffix "_gpu_x<N>". Every variant of two or more GPUs
carries the "multi_gpu" tag, so `--test_tag_filters=multi_gpu` selects all of them.

A variant needs exactly `gpus` GPUs: the runner leases that many, and a test marked
@requires_gpus(n) belongs to the variant with exactly n (none: its source fails at collection).

Pools are named after their hardware (pools.bzl explains why: the pool is part of each GPU
result's cache key, so it is what keeps an H100 result from serving an H200 run remotely).
"""

# Every GPU test process: NVLink multicast off (unsupported on the pools' NVSwitch setup).
GPU_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "NVSHMEM_DISABLE_NVLS": "1",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
}

# Every cpu test process: no accelerator is visible, so a cpu target runs the same cases on a GPU
# host as on a CPU host, and GPU work happens only under a lease (tools/runner/gpu_lease.py sets
# CUDA_VISIBLE_DEVICES for GPU variants). torch finds CUDA devices through CUDA_VISIBLE_DEVICES
# and ROCm ones through HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES; empty means none. The host's
# GPU count (nvidia-smi, TORCH_TEST_HOST_GPUS) is untouched: it is what the lease counts.
CPU_ENV = {
    "CUDA_VISIBLE_DEVICES": "",
    "HIP_VISIBLE_DEVICES": "",
    "ROCR_VISIBLE_DEVICES": "",
}

# GPU variants may first wait for the GPU lease (tools/runner/gpu_lease.py) while other GPU
# tests run; that wait counts against Bazel's timeout, so their default timeout is longer.
VARIANTS = {
    "cpu": {
        "suffix": "",
        "gpus": 0,
        "tags": [],
        "env": CPU_ENV,
        "timeout": None,
        "pool": "cpu",
    },
    "gpu": {
        "suffix": "_gpu",
        "gpus": 1,
        "tags": ["gpu"],
        "env": GPU_ENV,
        "timeout": "long",
        "pool": "gpu-h200-x1",
    },
    "multi_gpu": {
        "suffix": "_multi_gpu",
        "gpus": 2,
        "tags": ["gpu", "multi_gpu"],
        "env": GPU_ENV,
        "timeout": "long",
        "pool": "gpu-h200-x2",
    },
    "gpu_x4": {
        "suffix": "_gpu_x4",
        "gpus": 4,
        "tags": ["gpu", "multi_gpu", "gpu_x4"],
        "env": GPU_ENV,
        "timeout": "long",
        "pool": "gpu-h200-x4",
    },
    "gpu_x8": {
        "suffix": "_gpu_x8",
        "gpus": 8,
        "tags": ["gpu", "multi_gpu", "gpu_x8"],
        "env": GPU_ENV,
        "timeout": "long",
        "pool": "gpu-h200-x8",
    },
}

# Software a GPU variant may need besides GPUs. Inside a source the marker is the truth
# (@requires_nccl, @requires_triton); torch_test's argument of the same name lists the variants
# whose tests use it, and the pytest plugin fails collection when the two disagree.
FEATURES = {
    "nccl": {"marker": "requires_nccl", "tag": "nccl", "constraint": "has_nccl"},
    "triton": {"marker": "requires_triton", "tag": "triton", "constraint": "has_triton"},
}

def gpu_constraint(gpus):
    """The constraint a variant of `gpus` GPUs needs: "at least that many GPUs"."""
    return "has_gpus_{}".format(gpus)

def gpu_counts():
    """The GPU counts of the GPU variants, ascending."""
    return sorted([v["gpus"] for v in VARIANTS.values() if v["gpus"]])

def constraints_offered(gpu_count, features):
    """The constraints a host offers.

    One constraint setting per count ("at least N"): a host offers every count up to its own,
    which target_compatible_with (an AND of values) can test; one setting with a value per count
    could not express "this many or more".

    Args:
      gpu_count: the host's usable GPUs.
      features: names of FEATURES its torch has (ignored without GPUs).

    Returns:
      Constraint value names under //tools/platforms, e.g. ["has_gpus_1", "has_nccl"].
    """
    offered = [gpu_constraint(n) for n in gpu_counts() if n <= gpu_count]
    if gpu_count:
        offered += [FEATURES[f]["constraint"] for f in sorted(features)]
    return offered

def tag_filter(variant):
    """The --test_tag_filters value that selects exactly one variant.

    Its most specific tag (none for cpu), minus the first extra tag of every variant whose tags
    include all of its own.

    Args:
      variant: a key of VARIANTS.

    Returns:
      e.g. "gpu,-multi_gpu" for "gpu".
    """
    own = VARIANTS[variant]["tags"]
    include = own[-1:]
    exclude = []
    for other, spec in VARIANTS.items():
        extra = [t for t in spec["tags"] if t not in own]
        if other != variant and extra and len(extra) == len(spec["tags"]) - len(own):
            if extra[0] not in exclude:
                exclude.append(extra[0])
    return ",".join(include + ["-" + t for t in exclude])
