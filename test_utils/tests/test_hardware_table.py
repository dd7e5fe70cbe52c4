"""The Python side of the hardware table agrees with Starlark's, and the derived pieces with it.

tools/build_defs/variants.bzl is the one table; tools.hardware.table reads its literals
with Python's ast (plain pytest, the rig), the torch_test macro passes the GPU counts to every
target (in its spec, what tools.hardware.variants uses inside Bazel),
//tools/build_defs:variants writes the table as Starlark evaluates it (plus what Starlark
derives: tag filters, host constraints), .bazelrc spells the tag filters as configs, and
docs/variants.md shows the table to readers. Any disagreement fails here.
"""

import json
import re

import pytest

from test_utils import hardware
from tools.hardware import probe, table, variants

STARLARK = json.loads((table.ROOT / "tools" / "build_defs" / "variants.json").read_text())
BAZELRC = (table.ROOT / ".bazelrc").read_text()
VARIANTS_MD = (table.ROOT / "docs" / "variants.md").read_text()
VARIANTS = STARLARK["VARIANTS"]


def test_python_reads_the_table_starlark_evaluates():
    python = table.table()
    assert python["VARIANTS"] == VARIANTS
    assert python["FEATURES"] == STARLARK["FEATURES"]


def test_the_macro_gives_every_target_the_tables_gpu_counts():
    counts = {name: spec["gpus"] for name, spec in VARIANTS.items()}
    assert variants.VARIANTS == counts  # from this target's spec
    assert list(variants.VARIANTS) == list(table.table()["VARIANTS"]), "same order"


def test_features_are_the_markers_python_knows():
    assert set(STARLARK["FEATURES"]) == set(hardware.FEATURES)
    for feature, spec in STARLARK["FEATURES"].items():
        assert spec["marker"] == f"requires_{feature}" and hasattr(hardware, spec["marker"])
        assert spec["constraint"] == f"has_{feature}"
        assert hardware.requirements_of(
            hardware.requires(**{feature: True})(lambda: None)
        ).features == {feature}
        assert feature in probe.FEATURES, "and its probe"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_markers_place_a_test_in_the_variant_of_its_gpu_count(variant):
    gpus = VARIANTS[variant]["gpus"]
    assert variants.gpus_needed(variant) == gpus
    assert variants.variant_for_gpus(gpus) == variant
    assert hardware.Requirements(gpus=gpus).variant == variant


def test_a_gpu_count_without_variant_has_none():
    counts = {spec["gpus"] for spec in VARIANTS.values()}
    assert len(counts) == len(VARIANTS), "two variants with the same GPU count"
    assert 3 not in counts
    assert hardware.Requirements(gpus=3).variant is None


def _configs() -> dict[str, str]:
    return dict(re.findall(r"^test:(\w+) --test_tag_filters=(\S+)$", BAZELRC, re.MULTILINE))


def test_bazelrc_has_one_config_per_variant_with_its_tag_filter():
    assert _configs() == STARLARK["derived"]["tag_filters"]


def _selected(tag_filter: str, tags: list[str]) -> bool:
    # Bazel's --test_tag_filters: at least one positive tag (if any) and no negative one.
    positive = [t for t in tag_filter.split(",") if t and not t.startswith("-")]
    negative = [t[1:] for t in tag_filter.split(",") if t.startswith("-")]
    return (not positive or any(t in tags for t in positive)) and not any(
        t in tags for t in negative
    )


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_tag_filter_selects_exactly_its_variant(variant):
    tag_filter = STARLARK["derived"]["tag_filters"][variant]
    selected = [v for v, spec in VARIANTS.items() if _selected(tag_filter, spec["tags"])]
    assert selected == [variant], tag_filter


def test_multi_gpu_tag_marks_every_variant_of_two_or_more_gpus():
    for name, spec in VARIANTS.items():
        assert _selected("multi_gpu", spec["tags"]) == (spec["gpus"] >= 2), name


def test_a_host_offers_exactly_the_variants_of_its_gpu_count_or_fewer():
    offered = STARLARK["derived"]["constraints_offered"]
    for count, constraints in offered.items():
        for spec in VARIANTS.values():
            if spec["gpus"]:
                assert (f"has_gpus_{spec['gpus']}" in constraints) == (spec["gpus"] <= int(count))
        assert ("has_nccl" in constraints) == (int(count) > 0)


def test_pools_are_named_after_hardware():
    for name, spec in VARIANTS.items():
        if spec["gpus"]:
            assert spec["pool"].endswith(f"-x{spec['gpus']}"), (name, spec["pool"])


def _docs_variant_rows() -> dict[str, list[str]]:
    """docs/variants.md's variant table: {variant: [target, GPUs, tags, needs, pool]}."""
    lines = VARIANTS_MD.splitlines()
    start = lines.index("| variant | target | GPUs | tags | needs (platform constraints) | pool |")
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        name, *cells = [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        rows[name] = cells
    return rows


def test_the_docs_variant_table_is_the_table():
    expected = {
        name: [
            "test_x" + spec["suffix"],
            str(spec["gpus"]),
            " ".join(spec["tags"]),
            f"has_gpus_{spec['gpus']}" if spec["gpus"] else "",
            spec["pool"],
        ]
        for name, spec in VARIANTS.items()
    }
    assert _docs_variant_rows() == expected, "docs/variants.md's table vs variants.bzl"
