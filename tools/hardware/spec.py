"""What a test's processes are told of their target and their run: two values, one reader.

  Spec     the target's static facts, as the torch_test macro declares them: one environment
           entry (envvars.SPEC), json.encode of a dict of Spec's fields
           (tools/build_defs/torch_test.bzl), but for the facts recorded per target
           (RECORDED: its durations and GPU peak, from tools/test_times.bzl). Those are a
           runfile of their own, generated per target (tools/build_defs/recorded.bzl), which
           the entry names (`recorded`, a runfiles path): a packed upstream target records
           thousands of cases, and one environment string holds at most 128 KiB on Linux
           (MAX_ARG_STRLEN), past which its runner would not even start. A file of its own per
           target, not one shared by every test, so a changed recorded number re-runs exactly
           its target and an unchanged one nothing (tools/selftest/check_cache.py).
  Runtime  what the runner decided for this run (its deadline, the host's GPUs, the GPU share,
           the witness's socket): one JSON entry (envvars.RUNTIME) in the environment of every
           process it starts, no file: each process reads what it was started with, and no
           process can rewrite another's.

This module is the schema and the only reader of both: a new fact is a field here, set by its
one writer (the macro, or the runner's `Runtime(...)`), and read by name, with no variable of
its own. A process decodes its spec once (`spec()` is cached): the runner then hands the value
to the policies it calls. Outside Bazel (plain pytest, bench/, the rig) neither is set and the
defaults below hold. Standard library only.
"""

import dataclasses
import functools
import json
import os
import pathlib
import types
import typing
from collections.abc import Mapping

from tools.hardware import envvars

# What bench/ may use of this module (tools/selftest/test_bench.py holds it to this).
__all__ = ["Spec"]

# The Spec fields that reach a target in its recorded runfile, not in the entry.
RECORDED = ("durations", "gpu_peak_mib")


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
    # Bazel caches the target's result (it has no `external` tag): a date is no input of it.
    cached: bool = False
    durations: dict[str, float] = dataclasses.field(default_factory=dict)  # {node id: seconds}
    gpu_peak_mib: int | None = None  # recorded peak GPU memory per GPU of the test's processes

    def env(self, folder: str | os.PathLike | None = None) -> dict[str, str]:
        """The environment entry that hands this spec on, as the macro writes it: the recorded
        facts, if any, go into `folder`/recorded.json, which the entry names."""
        fields = dataclasses.asdict(self)
        if self.variants is not None:
            fields["variants"] = [[name, gpus] for name, gpus in self.variants.items()]
        recorded = {name: fields.pop(name) for name in RECORDED}
        fields["recorded"] = None
        if recorded != {name: getattr(Spec(), name) for name in RECORDED}:
            if folder is None:
                raise ValueError("a spec with recorded facts needs a folder for their file")
            path = pathlib.Path(folder) / "recorded.json"
            path.write_text(envvars.encode(recorded))
            fields["recorded"] = str(path)
        return {envvars.SPEC: envvars.encode(fields)}


@dataclasses.dataclass(frozen=True)
class Runtime:
    deadline: float | None = None  # epoch seconds by which harness timeouts must have fired
    host_gpus: int | None = None  # this host's GPU count, once probed (tools/hardware/probe.py)
    gpu_memory_fraction: float | None = None  # this test's share of its GPUs, if shared
    witness: str | None = None  # the runner's socket for what test bodies did

    def env(self) -> dict[str, str]:
        """The environment entry that hands this record on to the processes started with it."""
        return {envvars.RUNTIME: json.dumps(dataclasses.asdict(self))}


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
    """This target's Spec (defaults outside Bazel), decoded once per process."""
    # Inside Bazel a relative runfiles path is the runfiles tree's, whatever the cwd.
    tree = None
    if env.get("TEST_SRCDIR") and env.get("TEST_WORKSPACE"):
        tree = os.path.join(env["TEST_SRCDIR"], env["TEST_WORKSPACE"])
    return _decoded(env.get(envvars.SPEC) or "", tree)


@functools.cache
def _decoded(text: str, tree: str | None) -> Spec:
    if not text:
        return Spec()
    fields = envvars.decode(text)
    if isinstance(fields.get("variants"), list):  # pairs, in the table's order
        fields["variants"] = dict(fields["variants"])
    inline = sorted(set(RECORDED) & fields.keys())
    if inline:  # one environment string cannot hold thousands of cases
        raise SpecError(f"{envvars.SPEC}: {inline} belong in the recorded file, not the entry")
    path = fields.pop("recorded", None)
    if path is not None:
        fields.update(_recorded(path, tree))
    return _checked(Spec, fields, envvars.SPEC)


def _recorded(path, tree: str | None) -> dict:
    """The recorded facts of the target's runfile (RECORDED's fields only)."""
    if not isinstance(path, str):
        raise SpecError(f"{envvars.SPEC}: recorded={path!r} (not a runfiles path)")
    where = os.path.join(tree, path) if tree else path
    try:
        fields = json.loads(pathlib.Path(where).read_text())
    except (OSError, ValueError) as error:
        raise SpecError(f"{envvars.SPEC}: its recorded facts {where}: {error}") from None
    if not isinstance(fields, dict):
        raise SpecError(f"{where}: {fields!r} is not an object of {list(RECORDED)}")
    other = sorted(fields.keys() - set(RECORDED))
    if other:
        raise SpecError(f"{where}: unknown fields {other}; a recorded file has {list(RECORDED)}")
    return fields


def runtime(env: Mapping[str, str] = os.environ) -> Runtime:
    """This run's Runtime, as the runner handed it on (defaults outside the runner)."""
    text = env.get(envvars.RUNTIME)
    if not text:
        return Runtime()
    return _checked(Runtime, json.loads(text), envvars.RUNTIME)
