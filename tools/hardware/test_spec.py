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


def test_every_spec_field_round_trips_through_its_one_entry_and_recorded_file(tmp_path):
    written = _every_field_set(spec.Spec)
    env = written.env(tmp_path)
    assert list(env) == [envvars.SPEC]
    assert spec.spec(env) == written
    # The recorded facts travel in the file, the rest in the entry.
    assert sorted(json.loads((tmp_path / "recorded.json").read_text())) == sorted(spec.RECORDED)
    assert not set(spec.RECORDED) & set(json.loads(env[envvars.SPEC]))


def test_thousands_of_recorded_cases_leave_the_entry_small(tmp_path):
    # A packed upstream target records thousands of cases: inline, 5,000 of them made an entry
    # of ~500 KB, and Linux refuses to start a process with one over 128 KiB (MAX_ARG_STRLEN).
    cases = {
        f"pkg/test_upstream.py::TestOps::test_case_{i:04d}_{'x' * 60}": 0.5 for i in range(5000)
    }
    env = spec.Spec(variant="gpu", durations=cases, gpu_peak_mib=1024).env(tmp_path)
    assert len(env[envvars.SPEC]) < 1024
    read = spec.spec(env)
    assert read.durations == cases and read.gpu_peak_mib == 1024


def test_a_process_decodes_its_spec_once(tmp_path):
    env = spec.Spec(variant="gpu", durations={"t.py::test_a": 1.0}).env(tmp_path)
    first = spec.spec(env)
    (tmp_path / "recorded.json").unlink()  # read once: not needed again
    assert spec.spec(dict(env)) is first


def test_every_runtime_field_round_trips_through_the_entry_the_runner_exports():
    written = _every_field_set(spec.Runtime)
    env = written.env()
    assert list(env) == [envvars.RUNTIME]
    assert spec.runtime(env) == written


def test_the_macros_form_reads_as_written(tmp_path, monkeypatch):
    # What tools/build_defs/torch_test.bzl emits: json.encode of a dict (keys sorted, no
    # spaces), the table's GPU counts as pairs so that their order survives; the recorded
    # facts in the target's runfile (recorded.bzl), named by its runfiles path.
    tree = tmp_path / "runfiles" / "torch_tests"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg/t_gpu.recorded.json").write_text(
        '{"durations":{"t.py::test_a":1.5,"t.py::test_b":2},"gpu_peak_mib":512}'
    )
    text = (
        '{"declared_features":{"cpu":[],"gpu":["nccl"]},"declared_variants":["cpu","gpu"],'
        '"expectations":"pkg/t.toml","recorded":"pkg/t_gpu.recorded.json","variant":"gpu",'
        '"variants":[["gpu",1],["cpu",0]],"whole_gpu":false}'
    )
    monkeypatch.chdir(tmp_path)  # a test may move: the path is the runfiles tree's
    env = {
        envvars.SPEC: text,
        "TEST_SRCDIR": str(tmp_path / "runfiles"),
        "TEST_WORKSPACE": "torch_tests",
    }
    read = spec.spec(env)
    assert list(read.variants) == ["gpu", "cpu"], "the table's order"
    assert read.durations == {"t.py::test_a": 1.5, "t.py::test_b": 2.0}
    assert read.declared_features == {"cpu": [], "gpu": ["nccl"]}
    assert (read.variant, read.gpu_peak_mib, read.whole_gpu) == ("gpu", 512, False)
    assert spec.spec(read.env(tmp_path)) == read


def test_outside_bazel_the_defaults_hold():
    assert spec.spec({}) == spec.Spec()
    assert spec.runtime({}) == spec.Runtime()


def test_a_field_the_reader_lacks_is_refused_by_name(tmp_path):
    with pytest.raises(spec.SpecError, match=r"unknown fields \['whole'\]"):
        spec.spec({envvars.SPEC: json.dumps({"variant": "cpu", "whole": True})})
    (tmp_path / "recorded.json").write_text(json.dumps({"durations": {}, "variant": "gpu"}))
    entry = json.dumps({"recorded": str(tmp_path / "recorded.json")})
    with pytest.raises(spec.SpecError, match=r"unknown fields \['variant'\]"):
        spec.spec({envvars.SPEC: entry})
    with pytest.raises(spec.SpecError, match=r"unknown fields \['deadline_s'\]"):
        spec.runtime({envvars.RUNTIME: json.dumps({"deadline_s": 1.0})})


@pytest.mark.parametrize(
    "fields, recorded, wrong",
    [
        ({"whole_gpu": "1"}, {}, "whole_gpu='1'"),
        ({}, {"gpu_peak_mib": "512"}, "gpu_peak_mib='512'"),
        ({}, {"durations": {"t": "long"}}, "durations="),
        ({"declared_variants": "cpu"}, {}, "declared_variants='cpu'"),
    ],
)
def test_a_value_of_another_type_is_refused_by_name(tmp_path, fields, recorded, wrong):
    (tmp_path / "recorded.json").write_text(json.dumps(recorded))
    entry = {**fields, "recorded": str(tmp_path / "recorded.json")}
    with pytest.raises(spec.SpecError, match=wrong):
        spec.spec({envvars.SPEC: json.dumps(entry)})


def test_recorded_facts_in_the_entry_are_refused():
    with pytest.raises(spec.SpecError, match=r"\['durations'\] belong in the recorded file"):
        spec.spec({envvars.SPEC: json.dumps({"durations": {"t.py::test_a": 1.0}})})


def test_a_deadline_that_is_not_seconds_is_refused():
    with pytest.raises(spec.SpecError, match="deadline='soon'"):
        spec.runtime({envvars.RUNTIME: json.dumps({"deadline": "soon"})})


def test_a_missing_recorded_file_is_named(tmp_path):
    entry = json.dumps({"recorded": str(tmp_path / "t.recorded.json")})
    with pytest.raises(spec.SpecError, match="t.recorded.json"):
        spec.spec({envvars.SPEC: entry})
