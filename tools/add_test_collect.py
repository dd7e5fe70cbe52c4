"""add_test's child: collects one test file as its targets will and says what it found.

    python3 tools/add_test_collect.py TEST_FILE [--run]

Runs in the tests' interpreter (tools/add_test.py starts it with @pypi's environment, or the
host interpreter in host mode) with the GPUs hidden, as the cpu variant sees them, and the
variant plugin loaded by name as the runner loads it (tools do not import test_utils). Prints
one line, RESULT_PREFIX + JSON:
  placed      {node id: [variant, [features]]}: every collected case, selected or not
  modules     {module: file or None}: modules the file's collection loaded (not the plugin's)
  dists       {module: [distribution]}: the distribution whose RECORD lists its file
  requires    {distribution: [distribution]}: each loaded distribution's requirements,
              transitively, as installed here (what @pypi's libraries bring along)
  errors      collection errors (e.g. an import that fails on this host)
  skips       [[node id, reason]] of cpu cases that skipped here (with --run)
"""

import importlib.metadata
import json
import os
import re
import sys

RESULT_PREFIX = "torch_test add_test: "
PLUGIN = "tools.runner.session.plugin"
NOT_APPLICABLE_PROPERTY = "torch_test.not_applicable"  # tools.runner.session.outcome_audit


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_closure(names: set[str]) -> dict[str, list[str]]:
    """{dist: [every distribution it requires, transitively]} among installed ones."""
    installed = {_canonical(d.metadata["Name"]): d for d in importlib.metadata.distributions()}
    from packaging.requirements import Requirement  # pytest's own dependency

    direct = {}
    for name, dist in installed.items():
        reqs = [Requirement(text) for text in dist.requires or []]
        # Optional extras left out, as generate_build.py does for @pypi's libraries.
        wanted = {
            _canonical(r.name) for r in reqs if not r.marker or r.marker.evaluate({"extra": ""})
        }
        direct[name] = wanted & set(installed)
    closure = {}
    for name in names & set(installed):
        seen, todo = set(), list(direct[name])
        while todo:
            dep = todo.pop()
            if dep not in seen:
                seen.add(dep)
                todo.extend(direct.get(dep, ()))
        closure[name] = sorted(seen)
    return closure


def _distributions(modules: dict[str, str | None]) -> dict[str, list[str]]:
    """{module: [distribution]} by the installed files each distribution's RECORD lists.

    By file, not by top-level name: a package's vendored copies (setuptools/_vendor/jaraco, on
    sys.path once setuptools is imported) belong to the package that ships them.
    """
    owners = {}
    # Shallowest location first: a vendored dist-info inside a package does not win its files.
    for dist in sorted(
        importlib.metadata.distributions(), key=lambda d: len(str(d.locate_file("")))
    ):
        for file in dist.files or []:
            owners.setdefault(
                os.path.realpath(dist.locate_file(file)), _canonical(dist.metadata["Name"])
            )
    found = {}
    for name, file in modules.items():
        owner = owners.get(os.path.realpath(file)) if file else None
        if owner:
            found[name] = [owner]
    return found


class Recorder:
    def __init__(self):
        self.placed = {}
        self.before = set()
        self.loaded = {}
        self.errors = []
        self.skips = []

    def pytest_sessionstart(self, session):
        self.plugin = session.config.pluginmanager.get_plugin(PLUGIN)
        self.before = set(sys.modules)  # the plugin's and pytest's own imports are not the file's

    def pytest_deselected(self, items):
        self._record(items)

    def pytest_collectreport(self, report):
        if report.failed:
            self.errors.append(str(report.longrepr)[-3000:])

    def pytest_collection_finish(self, session):
        self._record(session.items)
        for name in set(sys.modules) - self.before:
            file = getattr(sys.modules.get(name), "__file__", None)
            if name not in ("__main__", "__mp_main__") and file != __file__:
                self.loaded[name] = file

    def pytest_runtest_logreport(self, report):
        # Skips "not applicable to this hardware table" are the plugin's, accepted as they are.
        accepted = any(key == NOT_APPLICABLE_PROPERTY for key, _ in report.user_properties)
        if report.skipped and report.when in ("setup", "call") and not accepted:
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            self.skips.append([report.nodeid, str(reason).removeprefix("Skipped: ")])

    def _record(self, items):
        for item in items:
            req = self.plugin.requirements(item)
            self.placed[item.nodeid] = [req.variant, sorted(req.features)]


def main(argv: list[str]) -> int:
    import pytest

    path, run = argv[0], "--run" in argv[1:]
    recorder = Recorder()
    args = [path, "-q", "-p", "no:cacheprovider", "-p", PLUGIN, "-o", "xfail_strict=true"]
    code = pytest.main(args + ([] if run else ["--collect-only"]), plugins=[recorder])
    dists = _distributions(recorder.loaded)
    result = {
        "placed": recorder.placed,
        "modules": recorder.loaded,
        "dists": dists,
        "requires": _requirement_closure({d for ds in dists.values() for d in ds}),
        "errors": recorder.errors,
        "skips": recorder.skips,
        "exit": int(code),
    }
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    sys.exit(main(sys.argv[1:]))
