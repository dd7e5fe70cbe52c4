"""What hardware a test needs, declared once on the test: the markers the session plugin reads
(tests import them from test_utils.hardware).

A test's requirements place it in exactly one Bazel variant of its source file: the variant
of tools/build_defs/variants.bzl with exactly the GPUs it needs (unmarked tests: cpu, 0 GPUs;
@requires_gpus(2): multi_gpu; @requires_nccl / @requires_triton alone: 1 GPU, gpu). A count no
variant has (@requires_gpus(3)) fails collection.
Markers work on test functions, unittest methods and whole classes; class and method markers
merge (the larger GPU count wins). NCCL and triton both need a GPU, so on their own they imply
one; they are the "features" of the table, and a target must declare exactly the features its
tests' markers use (torch_test's nccl / triton arguments; checked by the pytest plugin).

The variant table, the GPU probe and variant arithmetic are tools/hardware's (the runner uses
them without this test library).
"""

import dataclasses

from tools.hardware.probe import FEATURES
from tools.hardware.variants import variant_for_gpus

_ATTR = "__torch_test_requirements__"


@dataclasses.dataclass(frozen=True)
class Requirements:
    gpus: int = 0
    # Names of the table's FEATURES (tools.hardware.probe.FEATURES: each needs a GPU).
    features: frozenset[str] = frozenset()

    def merged(self, other: "Requirements") -> "Requirements":
        return Requirements(max(self.gpus, other.gpus), self.features | other.features)

    @property
    def min_gpus(self) -> int:
        return max(self.gpus, 1 if self.features else 0)

    @property
    def variant(self) -> str | None:
        """The variant with exactly min_gpus GPUs, or None if the table has none."""
        return variant_for_gpus(self.min_gpus)


def requires(*, gpus: int = 0, **features: bool):
    """Decorator recording hardware needs on a test function or class: requires(nccl=True)."""
    if gpus < 0:
        raise ValueError(f"requires(gpus={gpus}): GPU count must be >= 0")
    unknown = sorted(set(features) - set(FEATURES))
    if unknown:
        raise ValueError(
            f"requires({', '.join(unknown)}=...): the table's features are {list(FEATURES)}"
        )
    new = Requirements(gpus, frozenset(f for f, needed in features.items() if needed))

    def mark(obj):
        # vars(), not getattr(): a subclass must not re-merge its parent's marker into itself.
        if isinstance(obj, type):
            own = vars(obj).get(_ATTR, Requirements())
        else:
            own = getattr(obj, _ATTR, Requirements())
        setattr(obj, _ATTR, own.merged(new))
        return obj

    return mark


def requires_gpus(n: int):
    return requires(gpus=n)


# One marker per feature of the table (checked by //test_utils/tests:test_hardware_table).
requires_nccl = requires(nccl=True)
requires_triton = requires(triton=True)


def requirements_of(fn, cls=None) -> Requirements:
    """Requirements of a test: its class's markers (inherited ones too) merged with its own."""
    req = Requirements()
    if cls is not None:
        for klass in reversed(cls.__mro__):
            req = req.merged(vars(klass).get(_ATTR, Requirements()))
    fn = getattr(fn, "__func__", fn)
    return req.merged(getattr(fn, _ATTR, Requirements()))
