"""add_test's child: collects one test file as its targets will and says what it found.

    python3 tools/addtest/collect.py TEST_FILE... [--run]

(More than one file: a pack's, run in one process as its target runs them: directory_mode.)

Runs in the tests' interpreter (tools/add_test.py starts it with @pypi's environment, or the
host interpreter in host mode) in one variant's environment (the cpu variant's, GPUs hidden,
unless add_test asks for a GPU variant's), with the variant plugin loaded by name as the runner
loads it (tools do not import test_utils). Prints one line, RESULT_PREFIX + JSON:
  placed      {node id: [variant, [features]]}: every collected case, selected or not
  modules     {module: file or None}: modules the file loaded (not the plugin's), while it
              was collected and (--run) while its cases ran: a test body's own import too
  dists       {module: [distribution]}: the distribution whose RECORD lists its file
  requires    {distribution: [distribution]}: each installed distribution's requirements,
              transitively, as installed here (what @pypi's libraries bring along)
  errors      collection errors (e.g. an import that fails on this host)
  expected    node ids of cases that expect to fail (an xfail marker, unittest's
              expectedFailure: tools/runner/session/inventory.expected_failure)
  missed      top-level modules the file's own code (not a library's) looked for and nobody
              found, in this process and its ranks: with --run in a target's closure
              (tools/addtest/closure.py), what the measuring must add and run again
  torch       the torch version the file ran with (None: it imported no torch)
  seconds     what its cases took here, every phase summed (tools/addtest/pack.py's cost)
With --run, what that variant's cases did here (others are not this variant's):
  skips       [[node id, reason]]: skipped (an expected failure that failed is no skip)
  xfails      [node id]: failed as they expected to
  xpassed     [node id]: expected to fail, and passed
  fails       [[node id, first, later]]: failed; `first` is what the runner's witness reads of
              the case's first failure in any phase (tools/runner/process/witness.exception),
              `later` the same of a failure after it in a later phase, or None
"""

import functools
import importlib.machinery
import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile

# Imported before the session starts, so what they load is not counted as the file's.
from tools.runner.process import witness
from tools.runner.session import expectations, inventory

RESULT_PREFIX = "torch_test add_test: "
# A folder where each rank process a case spawns (torch's MultiProcessTestCase: spawn, which
# runs this file as __mp_main__) leaves the modules it loaded, for a body only ranks run.
RANK_MODULES = "ADD_TEST_RANK_MODULES"
PLUGIN = "tools.runner.session.plugin"
NOT_APPLICABLE_PROPERTY = "torch_test.not_applicable"  # tools.runner.session.outcome_audit


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_closure() -> dict[str, list[str]]:
    """{dist: [every distribution it requires, transitively]} of every installed one: those
    the file loaded, and those the runner brings (pytest's packaging is no dep of the file)."""
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
    for name in installed:
        seen, todo = set(), list(direct[name])
        while todo:
            dep = todo.pop()
            if dep not in seen:
                seen.add(dep)
                todo.extend(direct.get(dep, ()))
        closure[name] = sorted(seen)
    return closure


# What a module's __file__ ends with (source, bytecode, extension modules).
_MODULE_SUFFIXES = tuple(importlib.machinery.all_suffixes())


def _real_paths():
    """os.path.realpath of files, each folder resolved once: a distribution's thousands of
    files (each a symlink in a runfiles tree) share a few hundred folders."""
    real_dir = functools.lru_cache(maxsize=None)(os.path.realpath)

    def real(path) -> str:
        path = os.fspath(path)
        for _ in range(40):  # a longer chain (a loop): os.path.realpath's own answer
            if not os.path.islink(path):
                head, tail = os.path.split(path)
                return os.path.join(real_dir(head), tail)
            path = os.path.join(os.path.dirname(path), os.readlink(path))
        return os.path.realpath(path)

    return real


def _distributions(modules: dict[str, str | None]) -> dict[str, list[str]]:
    """{module: [distribution]} by the installed files each distribution's RECORD lists.

    By file, not by top-level name: a package's vendored copies (setuptools/_vendor/jaraco, on
    sys.path once setuptools is imported) belong to the package that ships them.
    """
    owners = {}
    real = _real_paths()
    # Shallowest location first: a vendored dist-info inside a package does not win its files.
    for dist in sorted(
        importlib.metadata.distributions(), key=lambda d: len(str(d.locate_file("")))
    ):
        name = _canonical(dist.metadata["Name"])  # parses METADATA: once, not once per file
        for file in dist.files or []:
            # Only files a module can be loaded from: torch's headers alone are thousands.
            if str(file).endswith(_MODULE_SUFFIXES):
                owners.setdefault(real(dist.locate_file(file)), name)
    found = {}
    for name, file in modules.items():
        owner = owners.get(real(file)) if file else None
        if owner:
            found[name] = [owner]
    return found


class Missed:
    """A finder last on sys.meta_path, so it is asked only for what no other finder found: the
    top-level names the file's own code (or the standard library's, on its behalf) asked for.
    A library's own probe (torch looks for `transformers` without importing it) is the
    library's: it probes the same in the target, which lacks the same."""

    def __init__(self, libraries: list[str]):
        self.names = set()
        # Real paths: a closure's entries link into @pypi's site, where their frames' files are.
        real = set()
        for folder in libraries:
            real.add(os.path.realpath(folder))
            real.update(os.path.dirname(os.path.realpath(e)) for e in os.scandir(folder))
        self.libraries = tuple(folder + os.sep for folder in real)

    def find_spec(self, name, path=None, target=None):
        if path is None and "." not in name:
            caller = sys._getframe(1)
            while caller and _importing(caller.f_code.co_filename):
                caller = caller.f_back
            origin = os.path.realpath(caller.f_code.co_filename) if caller else ""
            if not origin.startswith(self.libraries):
                self.names.add(name)
        return None

    @classmethod
    def install(cls) -> "Missed":
        """Last on sys.meta_path; the libraries are the site folders on sys.path."""
        missed = cls([p for p in sys.path if p and os.path.isdir(p) and _is_site(p)])
        sys.meta_path.append(missed)
        return missed


def _importing(filename: str) -> bool:
    """A frame of the import system itself (importlib's frozen bootstrap, importlib's package)."""
    return filename.startswith("<frozen") or os.sep + "importlib" + os.sep in filename


def _is_site(folder: str) -> bool:
    """A folder of installed distributions: a site-packages, or @pypi's site or its closure."""
    return any(p.name.endswith(".dist-info") for p in pathlib.Path(folder).iterdir())


class Recorder:
    def __init__(self):
        self.placed = {}
        self.before = set()
        self.loaded = {}
        self.errors = []
        self.expected = set()
        self.skips = []
        self.xfails = []
        self.called = set()
        self.failures = {}  # node id: [witness.exception of each failed phase, in order]
        self.seconds = 0.0
        self.started = set()  # node ids whose protocol began (a crash leaves the rest out)
        self.missed = set()  # the ranks' Missed names
        self.ranks = 0  # the most rank processes one case spawned
        self._dumps = 0  # rank dumps seen when the last case finished

    def pytest_runtest_logfinish(self, nodeid, location):
        # Each rank leaves its dump as it exits, and a multi-process case joins its ranks
        # before it finishes: the dumps since the last case are this case's ranks.
        dumps = len(list(pathlib.Path(os.environ[RANK_MODULES]).glob("*.json")))
        self.ranks = max(self.ranks, dumps - self._dumps)
        self._dumps = dumps

    def pytest_runtest_logstart(self, nodeid, location):
        self.started.add(nodeid)

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

    def pytest_sessionfinish(self, session):
        # At the session's end, not collection's: what the cases import as they run is theirs,
        # in this process and in the ranks it spawned.
        loaded = {name: getattr(sys.modules.get(name), "__file__", None) for name in sys.modules}
        for dump in sorted(pathlib.Path(os.environ[RANK_MODULES]).glob("*.json")):
            rank = json.loads(dump.read_text())
            loaded = rank["modules"] | loaded
            self.missed.update(rank["missed"])
        for name in set(loaded) - self.before:
            if name not in ("__main__", "__mp_main__") and loaded[name] != __file__:
                self.loaded[name] = loaded[name]

    def pytest_runtest_makereport(self, item, call):
        # What raised in this phase, as the runner's witness reads it (its verdict's input).
        # Read here, not from the report: for a unittest case, pytest's own hook has by now put
        # the exception unittest handed it in `call`.
        if call.excinfo is not None:
            seen = witness.exception(call.excinfo.value)
            if not seen["skip"] and not seen["xfail"]:
                self.failures.setdefault(item.nodeid, []).append(seen)

    def pytest_runtest_logreport(self, report):
        self.seconds += report.duration
        if report.when == "call":
            self.called.add(report.nodeid)
        if report.skipped and hasattr(report, "wasxfail"):  # failed as it expected to
            self.xfails.append(report.nodeid)
            return
        # Skips "not applicable to this hardware table" are the plugin's, accepted as they are.
        accepted = any(key == NOT_APPLICABLE_PROPERTY for key, _ in report.user_properties)
        if report.skipped and report.when in ("setup", "call") and not accepted:
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            self.skips.append([report.nodeid, str(reason).removeprefix("Skipped: ")])

    def xpassed(self) -> list[str]:
        """Cases that expected to fail and passed: a strict xfail marker's XPASS, which raises
        nothing, or unittest's "Unexpected success", which pytest raises as a failure."""
        out = []
        for nodeid in sorted(self.expected & self.called - set(self.xfails)):
            seen = self.failures.get(nodeid)
            if (
                not seen
                or seen[0]["msg"] == expectations.UNEXPECTED_SUCCESS
                and seen[0]["type"] == "Failed"
            ):
                out.append(nodeid)
        return out

    def fails(self) -> list:
        """[node id, first failure, a later one or None] of each case that failed, less those
        that failed as they expected to or passed against their expectation."""
        out = []
        skipped = set(self.xfails) | set(self.xpassed())
        for nodeid, seen in self.failures.items():
            if nodeid not in skipped:
                out.append([nodeid, seen[0], seen[1] if len(seen) > 1 else None])
        return out

    def _record(self, items):
        for item in items:
            req = self.plugin.requirements(item)
            self.placed[item.nodeid] = [req.variant, sorted(req.features)]
            if inventory.expected_failure(item) is not None:
                self.expected.add(item.nodeid)


def main(argv: list[str]) -> int:
    import pytest

    # argv: FILE... [--run] [-- PYTEST_ARG...]: the args after `--` are the stanza's own `args`.
    own, extra = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    paths, run = [a for a in own if a != "--run"], "--run" in own
    recorder = Recorder()
    missed = Missed.install()
    os.environ[RANK_MODULES] = tempfile.mkdtemp(prefix="add_test_ranks_")
    args = [*paths, "-q", "-p", "no:cacheprovider", "-p", PLUGIN, "-o", "xfail_strict=true", *extra]
    code = pytest.main(args + ([] if run else ["--collect-only"]), plugins=[recorder])
    shutil.rmtree(os.environ[RANK_MODULES], ignore_errors=True)
    dists = _distributions(recorder.loaded)
    result = {
        "placed": recorder.placed,
        "modules": recorder.loaded,
        "missed": sorted(missed.names | recorder.missed),
        "dists": dists,
        "requires": _requirement_closure(),
        "errors": recorder.errors,
        "expected": sorted(recorder.expected),
        "torch": getattr(sys.modules.get("torch"), "__version__", None),
        "seconds": round(recorder.seconds, 3),
        "skips": recorder.skips,
        "xfails": recorder.xfails,
        "xpassed": recorder.xpassed(),
        "fails": recorder.fails(),
        "exit": int(code),
        "started": len(recorder.started),
        "ranks": recorder.ranks,
        "pytest_args": extra,
    }
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


def _leave_modules() -> None:
    """In a rank process: its modules, to the folder RANK_MODULES names."""
    modules = {name: getattr(m, "__file__", None) for name, m in list(sys.modules.items())}
    path = pathlib.Path(os.environ[RANK_MODULES], f"{os.getpid()}.json")
    path.write_text(json.dumps({"modules": modules, "missed": sorted(_RANK_MISSED.names)}))


if __name__ == "__mp_main__" and RANK_MODULES in os.environ:
    import multiprocessing.util

    _RANK_MISSED = Missed.install()
    # Run as a process ends (multiprocessing's own exit, which skips atexit).
    multiprocessing.util.Finalize(None, _leave_modules, exitpriority=0)

if __name__ == "__main__":
    os.environ.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    sys.exit(main(sys.argv[1:]))
