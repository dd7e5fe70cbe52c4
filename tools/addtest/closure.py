"""The site a file's target will have: the @pypi distributions its deps bring (the runner's
among them), linked into a folder of their own, so that add_test runs the file's cases with what
its target gets, not with the whole lock (pinned mode; a host interpreter's packages are all
visible to its targets too, so host mode measures in the whole site as its targets run).

A distribution's files are its top-level entries in @pypi's `site/`, as generate_build.py gives
each of its py_libraries (`top_level_entries`, one reader of that fact).
"""

import importlib.metadata
import pathlib

from tools.addtest import deps as deps_of


def top_level_entries(dist: importlib.metadata.Distribution) -> set[str]:
    # Imported when called: generate_build needs `packaging` (through the lock's reader), which
    # the interpreter that runs `python3 tools/add_test.py` before re-running in Bazel may lack.
    from tools.python.generate_build import top_level_entries as entries

    return entries(dist)


def distributions(labels: list[str], requires: dict, root: pathlib.Path) -> set[str]:
    """The distributions (canonical names) a target with deps `labels` has in its runfiles: the
    @pypi labels they and the macro's runner bring, and what those require (`requires`: the
    collection's {distribution: [every one it requires]})."""
    brought = deps_of.BuildFiles(root).closure([*deps_of.implicit_deps(root), *labels])
    pypi = [label[len(deps_of.PYPI) :] for label in brought if label.startswith(deps_of.PYPI)]
    return with_requirements({deps_of.canonical(name) for name in pypi}, requires)


def with_requirements(names: set[str], requires: dict) -> set[str]:
    """`names` and every distribution they require (`requires` as in `distributions`): what
    their @pypi labels bring, as each py_library depends on its locked requirements."""
    required = {deps_of.canonical(k): v for k, v in requires.items()}
    return names | {r for name in names for r in required.get(name, ())}


def link(site: pathlib.Path, names: set[str], folder: pathlib.Path) -> pathlib.Path:
    """`folder`, holding a link to each top-level entry of `site` that a distribution of `names`
    installed."""
    folder.mkdir(parents=True, exist_ok=True)
    for dist in importlib.metadata.distributions(path=[str(site)]):
        if deps_of.canonical(dist.metadata["Name"]) in names:
            for entry in top_level_entries(dist):
                if (site / entry).exists() and not (folder / entry).exists():
                    (folder / entry).symlink_to(site / entry)
    return folder


def owners(site: pathlib.Path, modules: set[str]) -> dict[str, str]:
    """{top-level module: the distribution of `site` that installs it} for those of `modules`
    some distribution there installs (a package folder, a module file, an extension module)."""
    found = {}
    for dist in importlib.metadata.distributions(path=[str(site)]):
        for entry in top_level_entries(dist):
            name = entry.split(".", 1)[0]
            if name in modules and not entry.endswith((".dist-info", ".libs", ".data")):
                found.setdefault(name, deps_of.canonical(dist.metadata["Name"]))
    return found
