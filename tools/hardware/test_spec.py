"""Self-tests of the spec and the runtime record (tools/hardware/spec.py): a fact is a field.

Every field of either, whatever it is named, goes through its writer and comes back from the
reader as it was, so adding or renaming a fact is one edit there; a writer that says a field
the reader lacks, or a value of another type, is refused by name.
"""

import dataclasses
import json
import types
import typing

import pytest

from tools.hardware import envvars, spec


def _sample(hint):
    """A value of `hint` unlike its field's default (None, False, 0, empty)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is types.UnionType:
        return _sample(next(a for a in args if a is not type(None)))
    if typing.get_origin(hint) is list:
        return [_sample(args[0])]
    if typing.get_origin(hint) is dict:
        return {_sample(args[0]): _sample(args[1])}
    return {str: "gpu", int: 3, float: 2.5, bool: True}[hint]


def _every_field_set(cls):
    value = cls(**{name: _sample(hint) for name, hint in typing.get_type_hints(cls).items()})
    defaults = cls()
    for field in dataclasses.fields(cls):
        assert getattr(value, field.name) != getattr(defaults, field.name), field.name
    return value


def test_every_spec_field_round_trips_through_its_one_entry():
    written = _every_field_set(spec.Spec)
    env = written.env()
    assert list(env) == [envvars.SPEC]
    assert spec.spec(env) == written


def test_every_runtime_field_round_trips_through_the_file_the_runner_writes(tmp_path):
    written = _every_field_set(spec.Runtime)
    env = written.write(tmp_path)
    assert list(env) == [envvars.RUNTIME]
    assert spec.runtime(env) == written


def test_the_macros_form_reads_as_written():
    # What tools/build_defs/torch_test.bzl emits: json.encode of a dict (keys sorted, no
    # spaces), the table's GPU counts as pairs so that their order survives.
    text = (
        '{"declared_features":{"cpu":[],"gpu":["nccl"]},"declared_variants":["cpu","gpu"],'
        '"durations":{"t.py::test_a":1.5,"t.py::test_b":2},"expectations":"pkg/t.toml",'
        '"gpu_peak_mib":512,"variant":"gpu","variants":[["gpu",1],["cpu",0]],'
        '"whole_gpu":false}'
    )
    read = spec.spec({envvars.SPEC: text})
    assert list(read.variants) == ["gpu", "cpu"], "the table's order"
    assert read.durations == {"t.py::test_a": 1.5, "t.py::test_b": 2.0}
    assert read.declared_features == {"cpu": [], "gpu": ["nccl"]}
    assert (read.variant, read.gpu_peak_mib, read.whole_gpu) == ("gpu", 512, False)
    assert spec.spec(read.env()) == read


def test_outside_bazel_the_defaults_hold():
    assert spec.spec({}) == spec.Spec()
    assert spec.runtime({}) == spec.Runtime()


def test_a_field_the_reader_lacks_is_refused_by_name(tmp_path):
    with pytest.raises(spec.SpecError, match=r"unknown fields \['whole'\]"):
        spec.spec({envvars.SPEC: json.dumps({"variant": "cpu", "whole": True})})
    (tmp_path / "r.json").write_text(json.dumps({"deadline_s": 1.0}))
    with pytest.raises(spec.SpecError, match=r"unknown fields \['deadline_s'\]"):
        spec.runtime({envvars.RUNTIME: str(tmp_path / "r.json")})


@pytest.mark.parametrize(
    "fields, wrong",
    [
        ({"whole_gpu": "1"}, "whole_gpu='1'"),
        ({"gpu_peak_mib": "512"}, "gpu_peak_mib='512'"),
        ({"durations": {"t": "long"}}, "durations="),
        ({"declared_variants": "cpu"}, "declared_variants='cpu'"),
    ],
)
def test_a_value_of_another_type_is_refused_by_name(fields, wrong):
    with pytest.raises(spec.SpecError, match=wrong):
        spec.spec({envvars.SPEC: json.dumps(fields)})


def test_a_deadline_that_is_not_seconds_is_refused(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"deadline": "soon"}))
    with pytest.raises(spec.SpecError, match="deadline='soon'"):
        spec.runtime({envvars.RUNTIME: str(tmp_path / "r.json")})


def test_a_record_whose_runner_is_gone_says_so(tmp_path):
    with pytest.raises(spec.SpecError, match="runtime.json"):
        spec.runtime({envvars.RUNTIME: str(tmp_path / "runtime.json")})
