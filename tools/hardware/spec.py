"""What a test's processes are told of their target and their run: two values, one reader.

  Spec     the target's static facts, as the torch_test macro declares them: one environment
           entry (envvars.SPEC), json.encode of a dict of Spec's fields
           (tools/build_defs/torch_test.bzl). An environment entry, not a generated file in
           runfiles: Bazel 4.2.3 keys a test's cache on its env as it keys it on its inputs, so a
           changed recorded duration or peak still re-runs exactly its target
           (tools/selftest/check_cache.py), with no rule to generate and stage a file per target.
  Runtime  what the runner decided for this run (its deadline, the host's GPUs, the GPU share,
           the witness's socket): one JSON file in the runner's private temp dir, its path the
           one entry it exports (envvars.RUNTIME) to every process it starts.

This module is the schema and the only reader of both: a new fact is a field here, set by its
one writer (the macro, or the runner's `Runtime(...)`), and read by name, with no variable of
its own. Outside Bazel (plain pytest, bench/, the rig) neither is set and the defaults below
hold. Standard library only.
"""

import dataclasses
import json
import os
import pathlib
import types
import typing
from collections.abc import Mapping

from tools.hardware import envvars


@dataclasses.dataclass(frozen=True)
class Spec:
    variant: str = "cpu"
    # {variant: GPUs} of the table, in its order (JSON pairs: json.encode sorts an object's
    # keys); None: tools/hardware/variants.py reads the table itself.
    variants: dict[str, int] | None = None
    declared_variants: list[str] | None = None  # the source's targets; None under plain pytest
    declared_features: dict[str, list[str]] | None = None  # {variant: [feature]}
    whole_gpu: bool = False  # never share a GPU (tools/runner/gpu_share.py)
    expectations: str | None = None  # the declared-outcomes file, a runfiles path
    durations: dict[str, float] = dataclasses.field(default_factory=dict)  # {node id: seconds}
    gpu_peak_mib: int | None = None  # recorded peak GPU memory per GPU of the test's processes

    def env(self) -> dict[str, str]:
        """The environment entry that hands this spec on (the macro writes the same JSON)."""
        fields = dataclasses.asdict(self)
        if self.variants is not None:
            fields["variants"] = [[name, gpus] for name, gpus in self.variants.items()]
        return {envvars.SPEC: envvars.encode(fields)}


@dataclasses.dataclass(frozen=True)
class Runtime:
    deadline: float | None = None  # epoch seconds by which harness timeouts must have fired
    host_gpus: int | None = None  # this host's GPU count, once probed (tools/hardware/probe.py)
    gpu_memory_fraction: float | None = None  # this test's share of its GPUs, if shared
    witness: str | None = None  # the runner's socket for what test bodies did

    def write(self, folder: str | os.PathLike) -> dict[str, str]:
        """Writes the record into `folder`; returns the entry that names it for children."""
        path = pathlib.Path(folder) / "runtime.json"
        path.write_text(json.dumps(dataclasses.asdict(self)))
        return {envvars.RUNTIME: str(path)}


class SpecError(ValueError):
    pass


def _conforms(value, hint) -> bool:
    """Whether a JSON value is of a field's type (str, int, float, bool, None, list, dict)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType:
        return any(_conforms(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin is list:
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()
        )
    return isinstance(value, hint) and (hint is bool or not isinstance(value, bool))


def _checked(cls, fields: dict, where: str):
    """`cls(**fields)`, refusing a field it lacks or a value of another type: the writer and
    this schema must agree, or every process of the target fails at once, naming the field."""
    hints = typing.get_type_hints(cls)
    unknown = sorted(fields.keys() - hints.keys())
    if unknown:
        raise SpecError(f"{where}: unknown fields {unknown}; {cls.__name__} has {sorted(hints)}")
    wrong = [f"{k}={v!r} (not {hints[k]})" for k, v in fields.items() if not _conforms(v, hints[k])]
    if wrong:
        raise SpecError(f"{where}: {', '.join(wrong)}")
    return cls(**fields)


def spec(env: Mapping[str, str] = os.environ) -> Spec:
    """This target's Spec (defaults outside Bazel)."""
    text = env.get(envvars.SPEC)
    if not text:
        return Spec()
    fields = envvars.decode(text)
    if isinstance(fields.get("variants"), list):  # pairs, in the table's order
        fields["variants"] = dict(fields["variants"])
    return _checked(Spec, fields, envvars.SPEC)


def runtime(env: Mapping[str, str] = os.environ) -> Runtime:
    """This run's Runtime, as the runner wrote it (defaults outside the runner)."""
    path = env.get(envvars.RUNTIME)
    if not path:
        return Runtime()
    try:
        text = pathlib.Path(path).read_text()
    except OSError as error:  # the runner is gone: its record with it
        raise SpecError(f"{envvars.RUNTIME}={path}: {error}") from None
    return _checked(Runtime, json.loads(text), path)
