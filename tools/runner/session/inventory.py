"""Every test a source defines, found apart from the tests' own session: the inventory.

A target is green only when every test its source defines ran with a real outcome (or is
declared). Checking that from inside the test session trusts what the session can be told:
warning filters hide pytest's "cannot collect" warnings, a conftest drops items, a plugin is
switched off, ini options rename what pytest collects. So the runner starts one more process
beside the tests, `recorder` below (child.py --inventory), which collects the sources with
the conftests pytest finds for them (and the plugins they name), but none of the target's
args (but for those that make cases: `--doctest-modules`, `--doctest-glob`), ini file (an
empty one: pytest's default naming) or other plugins, and writes:

  items        every case pytest's collection makes from the source, by case key
               (`/.../dir/test_x.py::Class::test_y[param]`: collection_record.case_key), with
               its variant (the plugin's markers, torch's decorators adapted as in the tests),
               its parameters' reprs (the shards' stability check, tools/runner/collection.py),
               whether it expects to fail (an xfail marker, unittest.expectedFailure) and
               whether it is not applicable to the hardware table;
  unloaded     every source file that yields no case, with why: it failed to import
               ("failed", its `Type: message`), or skipped itself at import ("skipped", e.g.
               pytest.importorskip): each is a case of the record, keyed by the file, so a
               packed target's other files keep their cases and verdicts;
  uncollected  every test-named thing the modules define that yields no case: module
               functions named test*, methods test* of classes named Test* (pytest's defaults)
               and what unittest's loader runs (`load_tests` included); a class that says
               `__test__ = False` in its own body is abstract on purpose and not counted.

What a conftest may do here, and what the record then holds:
  generate cases  (pytest_generate_tests, a fixture's params, a plugin it names): they are the
                  source's cases, recorded as the session runs them (`test_a[1]`, `test_a[2]`).
  remove cases    once collected (pytest_collection_modifyitems, in any order or hook wrapper,
                  pytest_deselected): not taken out. A case is recorded as the collection
                  yields it (`pytest_itemcollected`, our hook wrapper outermost), before any
                  selection; so the session's removal of it leaves it never run.
  keep a case from being collected at all (pytest_pycollect_makeitem returning nothing or
                  an item of its own, a module collector of its own): the definitions scan does
                  not ask pytest. Each definition with no case fails every target of the source;
                  a source pytest never made a module of is imported here for it, and one that
                  cannot be imported is itself such a definition. (collect_ignore and
                  pytest_ignore_collect apply to what pytest finds below its arguments, not to
                  the files it is given; a file they kept out would be one with no module.)
  mark a case     xfail: read as the case is collected, before any conftest hook on it, so
                  a conftest's marker is no expectation (its generated parameters' marks are
                  part of the cases it generates).
  rename a case   (rewrite its id in a hook): the recorded name is the one pytest gave it,
                  which the session then never runs.
  stop the process (raise, pytest.exit, os._exit, a pytest_collection of its own): no record,
                  and the target fails saying so. The process ends as soon as the record is
                  written: none of the conftest's later hooks runs.
What it sees is pytest's defaults for every option and ini value: a generation that depends on
the target's args or ini file generates here what the defaults give, and the session's other
cases leave the inventory's never run (red, not hidden).

The runner then judges each case of the target's variant by what its witness saw the case do
(tools/runner/verdict.py): a case that neither ran, nor went to another shard, nor was left out
by the user's own filter (-k, --test_filter, node ids) fails the target as "defined but never
ran", and anything uncollected fails every target of the source. One rule, so a new way to hide
a test (an inherited `__test__ = False`, an `__init__`, a conftest's selection, a silenced
warning) is caught without a check of its own.
"""

import dataclasses
import json
import os
import pathlib
import sys
import unittest

from tools.results import record
from tools.runner.session import collection_record

# Pytest's default naming (python_functions, python_classes): the inventory does not read the
# target's ini file, so renaming what pytest collects there cannot shrink the inventory.
_TEST_PREFIX = "test"
_CLASS_PREFIX = "Test"
_ERROR_TEXT = 3000  # the last characters of a collection error kept in the record


@dataclasses.dataclass(frozen=True)
class Item:
    """A case of the inventory (`items` above)."""

    variant: str  # the variant the session plugin places it in
    params: dict  # its parameters' reprs (collection_record.describe)
    xfail: dict | None  # what it expects to fail with (expected_failure), or None
    not_applicable: str | None  # why the hardware table cannot run it, or None


@dataclasses.dataclass
class Inventory:
    """The inventory's file: written here, read by tools/runner/collection.py and verdict.py."""

    items: dict[str, Item]
    uncollected: list  # [definition, what]
    unloaded: dict  # path -> [record.FAILED or record.SKIPPED, its text]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Inventory":
        """Refuses a key this schema lacks or misses (renamed on one side only)."""
        raw = json.loads(text)
        try:
            raw["items"] = {k: Item(**v) for k, v in raw["items"].items()}
            return cls(**raw)
        except (KeyError, TypeError) as error:
            raise ValueError(f"an inventory of another schema: {error} ({__file__})") from None


# The target's options that make cases of their own (doctests), carried to the inventory: a
# doctest the target runs is a case the source defines, inventoried like a function.
_DOCTEST_FLAGS = ("--doctest-modules", "--doctest-ignore-import-errors")
_DOCTEST_VALUED = "--doctest-glob"


def case_making_options(args: list[str]) -> list[str]:
    """The options among the target's `args` that make cases (`--doctest-modules`,
    `--doctest-glob PAT`), for the inventory's collection."""
    out = []
    for i, arg in enumerate(args):
        if arg in _DOCTEST_FLAGS or arg.startswith(_DOCTEST_VALUED + "="):
            out.append(arg)
        elif arg == _DOCTEST_VALUED and i + 1 < len(args):
            out += [arg, args[i + 1]]
    return out


def base_id(case: str) -> str:
    """A case's id without its parameters: `.../test_x.py::T::test_a` for `...::test_a[p]`.
    Parameters are a bracketed tail of the last name; a name torch generates may hold brackets
    of its own (`test_op_[aten::isreal]`), and a definition by that name is its own case."""
    path, sep, name = case.partition("::")
    return path + sep + name.split("[", 1)[0]


def _abstract(cls) -> bool:
    return vars(cls).get("__test__", True) is False


def definitions(module, path: str) -> dict[str, str]:
    """{case key without parameters: what it is} for every test the module at `path` defines,
    whatever pytest collects."""
    found = {}
    for name, obj in list(vars(module).items()):
        if isinstance(obj, type):
            if issubclass(obj, unittest.TestCase) or not name.startswith(_CLASS_PREFIX):
                continue  # TestCases: unittest's loader below
            if _abstract(obj):
                continue
            for attr in dir(obj):
                if attr.startswith(_TEST_PREFIX) and callable(getattr(obj, attr, None)):
                    found[f"{path}::{name}::{attr}"] = f"method of class {name}"
        elif name.startswith(_TEST_PREFIX) and callable(obj):
            if getattr(obj, "__test__", True) is not False:
                found[f"{path}::{name}"] = "function"
    # pytest names a TestCase's cases by the module's names for the class (a class a function
    # made, bound to a name of its own: upstream's create_local_tensor_test_class), not its own.
    bound = {}
    for name, obj in vars(module).items():
        if isinstance(obj, type):
            bound.setdefault(obj, []).append(name)
    for case in _unittest_cases(module):
        cls = type(case)
        method = getattr(case, "_testMethodName", None)
        if method is None or isinstance(case, unittest.FunctionTestCase):
            # a function, a doctest, a broken load_tests: unittest runs it, pytest has no case
            found[f"{path}::{case.id()}"] = f"unittest {cls.__name__}"
            continue
        for name in bound.get(cls, [cls.__name__]):
            found[f"{path}::{name}::{method}"] = f"unittest.TestCase {cls.__name__}"
    return found


def _unittest_cases(module):
    """What unittest's loader runs from the module (its load_tests included), flattened."""
    try:
        suite = unittest.TestLoader().loadTestsFromModule(module)
    except Exception as error:  # a broken load_tests is the module's failure, shown as one
        return [_Broken(f"load_tests failed: {type(error).__name__}: {error}")]
    out, stack = [], [suite]
    while stack:
        node = stack.pop()
        if isinstance(node, unittest.TestSuite):
            stack.extend(node)
        elif not (isinstance(node, unittest.TestCase) and _abstract(type(node))):
            out.append(node)
    return out


class _Broken:
    """Stands for a load_tests that raised: it names the failure where a case's id would be."""

    def __init__(self, why: str):
        self._why = why

    def id(self) -> str:
        return self._why


def uncollected(defined: dict[str, str], collected: set[str]) -> list[list[str]]:
    """[case key, what it is] of each definition with no collected case."""
    have = set(collected) | {base_id(c) for c in collected}
    return [[d, what] for d, what in sorted(defined.items()) if d not in have]


def expected_failure(item) -> dict | None:
    """What the case expects of itself before it runs: {"raises": [type names] or None} for an
    xfail marker (as pytest evaluates it) or unittest's expectedFailure; None otherwise. Read
    as the case is collected, before a conftest's hook on it: a marker it adds is no
    expectation."""
    from _pytest.skipping import evaluate_xfail_marks

    for obj in (getattr(item, "obj", None), getattr(item, "cls", None)):
        if getattr(obj, "__unittest_expecting_failure__", False):
            return {"raises": None}
    try:
        xfail = evaluate_xfail_marks(item)
    except Exception:  # a condition that cannot be evaluated here expects nothing
        return None
    if xfail is None or not xfail.run:
        return None  # run=False: its body never runs, which fails it
    raises = xfail.raises
    if raises is None:
        return {"raises": None}
    kinds = raises if isinstance(raises, tuple) else (raises,)
    from tools.runner.process.witness import type_name

    return {"raises": [type_name(k) for k in kinds if isinstance(k, type)]}


def _collect_text(report) -> str:
    """`Type: message` of a file's failed import (the last `E ` line pytest shows), or the
    reason it skipped itself."""
    if report.skipped:
        longrepr = report.longrepr
        return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)[-_ERROR_TEXT:]
    lines = [line[1:].strip() for line in report.longreprtext.splitlines() if line[:1] == "E"]
    return (lines[-1] if lines else report.longreprtext.strip())[-_ERROR_TEXT:]


def recorder(out: int, sources: list[str], variant_of, not_applicable):
    """pytest plugin of the inventory process: records every case and definition, runs none.

    A case is recorded as pytest's collection makes it (`pytest_itemcollected`, outermost):
    what the conftest generates is in it (pytest_generate_tests, fixture params), what any
    hook later removes is not taken out of it (modifyitems, deselection), and what it expects
    of itself is read there, before a conftest's hook could mark it. `variant_of(item)` is the
    variant the session plugin places the item in, `not_applicable(item)` why torch's
    decorators place it on hardware no variant offers (or None); both read the source's own
    markers once every collection hook ran. `sources`: the target's files; a .py one pytest
    never made a module of (a conftest's own collector) is imported here, for its definitions.
    """
    import pytest
    from _pytest.outcomes import OutcomeException
    from _pytest.python import importtestmodule

    class Recorder:
        def __init__(self):
            self.modules = {}
            self.cases = {}  # case key -> (item, what it expects), in collection order
            # path -> [outcome, text] of a file that yields no cases: it failed to import
            # ("failed"), or skipped itself at import ("skipped", e.g. importorskip)
            self.unloaded = {}

        @pytest.hookimpl(wrapper=True)
        def pytest_make_collect_report(self, collector):
            report = yield
            # Not a doctest's text file: a Module too, of no module object.
            python = isinstance(collector, pytest.Module) and collector.path.suffix == ".py"
            if python and report.passed:
                self.modules[str(collector.path)] = collector.obj
            elif python:
                outcome = record.FAILED if report.failed else record.SKIPPED
                self.unloaded[str(collector.path)] = [outcome, _collect_text(report)]
            return report

        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_itemcollected(self, item):
            # Every item is a case: test functions and unittest methods, doctests, a plugin's
            # or conftest's own kind of item (its runtest is the body the witness sees).
            if isinstance(item, pytest.Item):
                self.cases[collection_record.case_key(item)] = (item, expected_failure(item))
            return (yield)

        @pytest.hookimpl(wrapper=True)
        def pytest_collection_modifyitems(self, session):
            result = yield
            collected = [item for item, _ in self.cases.values()]
            described = collection_record.describe(collected)  # as the shards compare
            cases = {
                # The variant first: placing it marks it not applicable.
                key: Item(variant_of(item), described[key], xfail, not_applicable(item))
                for key, (item, xfail) in self.cases.items()
            }
            functions = {
                k for k, (item, _) in self.cases.items() if isinstance(item, pytest.Function)
            }
            defined, never_imported = {}, []
            for path in sources:
                # Not a data file (a conftest's own kind, a doctest's text) nor a node id.
                if path.endswith(".py") and path not in self.modules and path not in self.unloaded:
                    try:
                        self.modules[path] = importtestmodule(pathlib.Path(path), session.config)
                    except (Exception, OutcomeException) as error:
                        # Its definitions cannot be read: the file itself is the one.
                        why = str(error)[-_ERROR_TEXT:]
                        what = f"a source file pytest made no module of; importing it: {why}"
                        never_imported.append([path, what])
            for path, module in self.modules.items():
                defined.update(definitions(module, path))
            found = Inventory(
                cases,
                # A definition is collected only as a test function: an item of another kind
                # under its name (a conftest's stand-in) does not run what it defines.
                uncollected(defined, functions) + never_imported,
                self.unloaded,
            )
            data = found.to_json().encode()  # to the runner's stream (descriptor `out`)
            while data:
                data = data[os.write(out, data) :]
            # Nothing of the conftest's runs after the record (its session hooks, its
            # unconfigure): the record is the inventory's one product.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
            return result

    return Recorder()
