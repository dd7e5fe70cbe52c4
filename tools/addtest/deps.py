"""add_test's deps: the Bazel labels for what a test file actually loaded.

Modules come from tools/addtest/collect.py (loaded while collecting the file and while its cases
ran, so a test body's own import counts, a guarded `if has_triton(): import triton` that did not
run adds nothing, and `functorch` is torch's); an import a case failed on is said.
  - a module of this repository -> the py_library of its package's BUILD.bazel that lists it;
  - torch.testing._internal.common_utils (upstream tests reach it through torch._dynamo's
    test_case too) -> //test_utils:torch_testing, the one label for torch's testing package;
  - any other module -> its distribution (importlib.metadata) -> @pypi//:<name>, when
    @pypi's manifest has it (a label that does not exist is never printed: a note says why).
Whatever another label already brings is left out: a distribution's installed requirements
(torchrec's fbgemm-gpu-cpu is kept: the lock installs torchrec without its declared deps, and
collection loads fbgemm_gpu), a first-party library's deps, and the runner's implicit deps.
"""

import ast
import dataclasses
import os
import pathlib
import re

TORCH_TESTING_MODULE = "torch.testing._internal.common_utils"
TORCH_TESTING = "//test_utils:torch_testing"
PYPI = "@pypi//:"
# The torch_test macro's implicit deps (RUNNER_DEPS): read from the macro, not repeated here.
_MACRO = "tools/build_defs/torch_test.bzl"


@dataclasses.dataclass
class Deps:
    labels: list[str]
    notes: list[str]


class BuildFiles:
    """py_library rules of this repository's BUILD files: {label: (srcs, deps)}."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self._packages = {}

    def package_of(self, path: pathlib.Path) -> str | None:
        """The package (a directory with BUILD.bazel) holding `path`, relative to the root."""
        for folder in path.parents:
            if folder != self.root and self.root not in folder.parents:
                return None
            if (folder / "BUILD.bazel").is_file():
                return folder.relative_to(self.root).as_posix().removeprefix(".")
        return None

    def libraries(self, package: str) -> dict[str, tuple[list[str], list[str]]]:
        if package not in self._packages:
            self._packages[package] = self._parse(package)
        return self._packages[package]

    def _parse(self, package: str) -> dict:
        build = self.root / package / "BUILD.bazel"
        rules = {}
        if not build.is_file():
            return rules
        for node in ast.walk(ast.parse(build.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "py_library"):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            name = _literal(kw.get("name"), "")
            label = f"//{package}:{name}"
            srcs = _literal(kw.get("srcs"), [])
            deps = [_absolute(d, package) for d in _literal(kw.get("deps"), [])]
            rules[label] = (srcs, deps)
        return rules

    def library_of(self, path: pathlib.Path) -> str | None:
        package = self.package_of(path)
        if package is None:
            return None
        relative = path.relative_to(self.root / package).as_posix()
        for label, (srcs, _) in self.libraries(package).items():
            if relative in srcs:
                return label
        return None

    def closure(self, labels) -> set[str]:
        """Every label `labels` bring, themselves included (first-party and @pypi)."""
        seen, todo = set(), list(labels)
        while todo:
            label = todo.pop()
            if label in seen:
                continue
            seen.add(label)
            if label.startswith("//"):
                package = label[2:].partition(":")[0]
                todo.extend(self.libraries(package).get(label, ([], []))[1])
        return seen


def _literal(node, default):
    try:
        return ast.literal_eval(node) if node is not None else default
    except ValueError:  # glob(), select(): not a module list we can read
        return default


def _absolute(label: str, package: str) -> str:
    if label.startswith(":"):
        return f"//{package}{label}"
    if label.startswith("//") and ":" not in label:
        return f"{label}:{label.rsplit('/', 1)[-1]}"
    return label


def implicit_deps(root: pathlib.Path) -> list[str]:
    """The torch_test macro's RUNNER_DEPS, as full labels (`//tools/runner:runner`)."""
    found = re.search(r"^RUNNER_DEPS = (\[.*?\])", (root / _MACRO).read_text(), re.M | re.S)
    return [_absolute(d, "") for d in ast.literal_eval(found.group(1))] if found else []


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def labels_for(result: dict, test_file: pathlib.Path, root: pathlib.Path, manifest: dict) -> Deps:
    """Deps of `test_file` from its collection `result` (tools/addtest/collect.py)."""
    root, test_file = root.resolve(), test_file.resolve()
    builds = BuildFiles(root)
    notes = []
    first_party, dists = set(), set()
    for module, file in sorted(result["modules"].items()):
        if module == TORCH_TESTING_MODULE:
            first_party.add(TORCH_TESTING)
        # Resolved: under Bazel the module's file is a runfiles link into the source tree. A
        # bare name (torch.classes' `_classes.py`, torch.ops' `_ops.py`) is no file's path:
        # resolved, it would name a file of whatever directory add_test runs in.
        path = pathlib.Path(os.path.realpath(file)) if file and os.path.isabs(file) else None
        if path is not None and root in path.parents:
            if path == test_file:
                continue
            label = builds.library_of(path)
            if label:
                first_party.add(label)
            elif path.suffix == ".py":
                notes.append(f"{module} ({path.relative_to(root)}) is in no py_library: add one")
            continue
        dists.update(result["dists"].get(module, []))
    # What only the cases' run looked for (tools/addtest/measure.py), a find_spec probe too.
    dists.update(result.get("added", {}))
    for dist, looked_for in sorted(result.get("added", {}).items()):
        notes.append(
            f"{PYPI}{dist}: only the cases, as they ran, looked for {', '.join(looked_for)} "
            "(collecting the file did not): measured with it, and kept as a dep"
        )
    requires = {canonical(k): set(v) for k, v in result["requires"].items()}
    # Brought along: the macro's runner, the first-party libraries, and what those bring.
    brought_labels = builds.closure([*implicit_deps(root), *first_party])
    brought = {canonical(label[len(PYPI) :]) for label in brought_labels if label.startswith(PYPI)}
    for dist in list(brought):
        brought |= requires.get(dist, set())
    # A library another chosen label brings is left out, first-party and @pypi alike.
    kept_first = {
        label
        for label in first_party - builds.closure(implicit_deps(root))
        if not any(label in builds.closure([o]) for o in first_party if o != label)
    }
    kept_dists = set()
    for dist in sorted(dists - brought, key=lambda d: -len(requires.get(d, ()))):
        if not any(dist in requires.get(k, ()) for k in kept_dists):
            kept_dists.add(dist)
    packages = set(manifest.get("packages", {}))
    missing = set(manifest.get("missing", []))
    labels = sorted(kept_first)
    for dist in sorted(kept_dists):
        if dist in packages or dist in missing:
            labels.append(PYPI + dist)
            if dist in missing:
                notes.append(
                    f"{PYPI}{dist}: this host interpreter lacks it, so targets needing it are "
                    "SKIPPED here (host mode)"
                )
        else:
            notes.append(
                f"collection loaded {dist}, which the lock does not have: no label printed "
                "(add it to third_party/python/requirements.in if the tests need it)"
            )
    for run in [result, *result.get("gpu_runs", {}).values()]:
        for nodeid, first, _ in run.get("fails", []):
            if first["type"] in ("ModuleNotFoundError", "ImportError"):
                notes.append(
                    f"{nodeid} failed importing as it ran ({first['type']}: {first['msg']}): "
                    "the tests' environment lacks it, so its target fails too (add it to "
                    "third_party/python/requirements.in if the test needs it)"
                )
    return Deps(labels, notes)
