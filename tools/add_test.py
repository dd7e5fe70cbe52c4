"""Prints the torch_test stanza for a test file, and what it measured to get there.

    python3 tools/add_test.py path/to/test_x.py [--no-run]     (from any directory)
    python3 tools/add_test.py DIR [--no-run] [--jobs N]        (writes DIR's files: below)

For a directory, tools/add_test_dir.py writes DIR/BUILD.bazel and the expectations files of
every test_*.py in it, measuring the files in parallel, and on a re-run updates what changed.

Collects the file the way its targets will, in the tests' own environment: @pypi's, which
`tools/bazel` fetches (the pinned lock, or the host interpreter when TORCH_TEST_PYTHON is set),
so a fresh clone whose python3 has no torch works. The child (tools/add_test_collect.py) hides
the GPUs, as the cpu variant does, loads the variant plugin, and reports every case's variant
and features (our markers and torch's own decorators,
tools/runner/session/upstream_decorators.py), the
modules the file loaded, and (unless --no-run) the skips of the cases this host runs. On a host
with GPUs, the cases of each GPU variant it has enough GPUs for run too, in a child of that
variant's environment, one such child at a time (no two measuring runs share a GPU).
Prints:
  - the stanza: variants, nccl / triton, deps (tools/add_test_deps.py: from the modules loaded;
    every label exists in @pypi's manifest or a BUILD file), expectations when cases skipped;
  - per variant, the cases that land there;
  - what the cases did (unless --no-run), as expectations entries of their variant to review:
    skips with their reason, failures as `fail` entries and expected failures that passed as
    `pass` entries, both with `proposed = true` (the runner refuses one until a person removes
    that line); expected failures that failed need none;
  - plainly, when the file cannot be collected on this host, or defines tests nothing collects.
Exit status 1 when the file cannot be collected here (the stanza would be a guess).
"""

import ast
import dataclasses
import hashlib
import json
import os
import pathlib
import pwd
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as `python3 tools/add_test.py` from any directory

from tools import add_test_collect, add_test_deps  # noqa: E402
from tools.hardware import envvars, probe, spec, table, variants  # noqa: E402
from tools.python import host_mode  # noqa: E402
from tools.runner import collection  # noqa: E402
from tools.runner.session import expectations, stable_text  # noqa: E402

COLLECTOR = ROOT / "tools" / "add_test_collect.py"


@dataclasses.dataclass
class Environment:
    """The tests' interpreter, the site folder @pypi adds to their path, and @pypi's manifest."""

    python: str
    site: pathlib.Path | None
    manifest: dict
    described: str

    @classmethod
    def of_this_interpreter(cls) -> "Environment":
        """The interpreter running now, inside a Bazel target that has @pypi's torch and
        manifest.json (a data dep) in its runfiles: add_test's own self-tests."""
        # The runfiles' @pypi (torch itself may be the host interpreter's, in host mode).
        runfiles = pathlib.Path(os.environ.get("RUNFILES_DIR") or os.environ["TEST_SRCDIR"])
        manifest = json.loads((runfiles / "pypi" / "manifest.json").read_text())
        return cls(sys.executable, None, manifest, "this target's interpreter")


def _environment_at(repo: pathlib.Path) -> Environment:
    manifest = json.loads((repo / "manifest.json").read_text())
    mode = f"host interpreter {host_mode.host_python()}"  # TORCH_TEST_PYTHON, or the setup's
    described = mode if manifest.get("mode") == "host" else "@pypi's pinned lock"
    return Environment(str(repo / "venv" / "bin" / "python3"), repo / "site", manifest, described)


def _asks_for_host_mode() -> bool:
    """Whether tools/bazel would use a host interpreter (tools/python/host_mode.py)."""
    return host_mode.host_python() is not None


def fetched_pypi() -> Environment | None:
    """@pypi as tools/bazel last fetched it, read where Bazel keeps it by default, without
    starting Bazel (a command would queue behind any build running in this checkout); None when
    it is not there, is of the other mode, is older than the lock, or another lock is asked for."""
    if os.environ.get("TORCH_TEST_LOCK"):
        return None
    cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    user = os.environ.get("USER") or pwd.getpwuid(os.getuid()).pw_name  # as Bazel names it
    workspace = hashlib.md5(str(ROOT).encode()).hexdigest()
    repo = cache / "bazel" / f"_bazel_{user}" / workspace / "external" / "pypi"
    manifest = repo / "manifest.json"
    lock = ROOT / "third_party" / "python" / "requirements.lock"
    if not manifest.is_file() or manifest.stat().st_mtime < lock.stat().st_mtime:
        return None
    env = _environment_at(repo)
    if (env.manifest.get("mode") == "host") != _asks_for_host_mode():
        return None
    return env


def pypi_environment() -> Environment:
    """@pypi's environment, fetched by tools/bazel in the mode its environment asks for."""
    bazel = [str(ROOT / "tools" / "bazel")]
    fetch = subprocess.run(
        [*bazel, "build", "@pypi//:manifest.json"], cwd=ROOT, capture_output=True, text=True
    )
    if fetch.returncode:
        raise SystemExit(f"tools/bazel could not fetch @pypi:\n{fetch.stderr[-3000:]}")
    base = subprocess.run(
        [*bazel, "info", "output_base"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    return _environment_at(pathlib.Path(base, "external", "pypi"))


# pytest's exit statuses of a run that ended as it should: all passed, some failed.
ENDED_NORMALLY = (0, 1)
# pytest's exit status when it crashed itself (INTERNALERROR), its later cases never run.
PYTEST_CRASHED = 3
# Formatting a failure's traceback is where pytest itself crashes on real files (CPython 3.11's
# "AST constructor recursion depth mismatch" in its source-range lookup); Python's own
# formatter does not parse source, so the file can run to its end.
NATIVE_TRACEBACKS = ["--tb=native"]


def collect(
    path: pathlib.Path, env: Environment, run: bool, variant: str = "cpu", host_gpus: int = 0
) -> dict:
    """tools/add_test_collect.py's result for `path`, in `env`, as `variant`'s target runs it
    (a GPU variant's on a host of `host_gpus`). A run that pytest ended with an INTERNALERROR
    is measured again with Python's traceback formatter; if that run ends normally, its result
    is the file's and `pytest_args` says what the stanza must pass."""
    result = _collect(path, env, run, [], variant, host_gpus)
    if run and result.get("exit") == PYTEST_CRASHED:
        again = _collect(path, env, run, NATIVE_TRACEBACKS, variant, host_gpus)
        if again.get("exit") != PYTEST_CRASHED:
            again["crashed_with_defaults"] = {"started": result["started"], "exit": result["exit"]}
            return again
    return result


def gpu_variants_here(placed: dict[str, list], host_gpus: int) -> list[str]:
    """The GPU variants `placed` uses that a host of `host_gpus` GPUs can run, table order."""
    used = {p[0] for p in placed.values()}
    return [v for v in variants.VARIANTS if v in used and 0 < variants.gpus_needed(v) <= host_gpus]


def measure_gpu_variants(
    path: pathlib.Path, env: Environment, result: dict, host_gpus: int
) -> None:
    """Runs the cases of each GPU variant of `result` (the cpu run's) a host of `host_gpus`
    can run, one variant after another; their results go in result["gpu_runs"] by variant, and
    what kept one from being had in result["gpu_errors"]. Nothing for a file that could not be
    collected."""
    if result["errors"]:
        return
    for variant in gpu_variants_here(result["placed"], host_gpus):
        try:
            result.setdefault("gpu_runs", {})[variant] = collect(
                path, env, True, variant, host_gpus
            )
        except SystemExit as error:  # the child's output: no result line
            result.setdefault("gpu_errors", {})[variant] = str(error)


def _collect(
    path: pathlib.Path,
    env: Environment,
    run: bool,
    pytest_args: list[str],
    variant: str = "cpu",
    host_gpus: int = 0,
) -> dict:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(envvars.PREFIX)}
    entries = [str(ROOT), *([str(env.site)] if env.site and env.site.is_dir() else [])]
    entries += filter(None, [child_env.get("PYTHONPATH")])
    # The variant's environment from the table (the cpu variant's hides the GPUs); a GPU
    # variant's child is told its variant and the host's GPUs, as its target's processes are,
    # and drops the cpu variant's hiding where add_test inherited it (run in a cpu target).
    variant_envs = {name: v["env"] for name, v in table.table()["VARIANTS"].items()}
    child_env.update(variant_envs[variant])
    if variant != "cpu":
        for key, hidden in variant_envs["cpu"].items():
            if child_env.get(key) == hidden and key not in variant_envs[variant]:
                del child_env[key]
        child_env.update(spec.Spec(variant=variant).env())
        child_env[envvars.HOST_GPUS] = str(host_gpus)
    child_env.update(
        PYTHONPATH=os.pathsep.join(entries),
        PYTHONDONTWRITEBYTECODE="1",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    # The hash seed a target's test process gets (a shell's own is not a test's): a failure
    # whose message follows set order (the first missing key of a set) then reads the same
    # here as in the target, so its proposed `match` holds there.
    child_env[collection.SEED_ENV] = collection.DEFAULT_SEED
    command = [env.python, str(COLLECTOR), str(path), *(["--run"] if run else [])]
    command += ["--", *pytest_args] if pytest_args else []
    out = subprocess.run(command, env=child_env, cwd=ROOT, capture_output=True, text=True)
    prefix = add_test_collect.RESULT_PREFIX
    lines = [line for line in out.stdout.splitlines() if line.startswith(prefix)]
    if not lines:
        raise SystemExit(
            f"collecting {path} with {env.described} failed:\n"
            f"{out.stdout[-3000:]}{out.stderr[-3000:]}"
        )
    return json.loads(lines[-1][len(prefix) :])


def _list(name: str, values: list[str]) -> list[str]:
    if not values:
        return []
    if len(values) == 1:
        return [f'    {name} = ["{values[0]}"],']
    return [f"    {name} = ["] + [f'        "{v}",' for v in values] + ["    ],"]


def stanza(
    path: pathlib.Path,
    placed: dict[str, list],
    deps: list[str],
    expectations: bool = False,
    srcs: list[str] | None = None,
    args: list[str] | None = None,
) -> str:
    """The torch_test call, its arguments in buildifier's order (name, the others by name,
    deps), so that formatting the BUILD file changes nothing. `srcs`: a pack of those files,
    named after `path` (then `path.stem` is the pack's name, not a file's). `args`: pytest
    arguments the file's measuring run needed (collect's `pytest_args`)."""
    used_variants = [v for v in variants.VARIANTS if any(p[0] == v for p in placed.values())]
    arguments = {}
    if used_variants != ["cpu"]:
        arguments["variants"] = _list("variants", used_variants)
    for feature in probe.FEATURES:
        used = [
            v for v in used_variants if any(p[0] == v and feature in p[1] for p in placed.values())
        ]
        arguments[feature] = _list(feature, used)
    if expectations:
        arguments["expectations"] = [f'    expectations = "{path.stem}.expectations.toml",']
    if srcs:
        arguments["srcs"] = _list("srcs", srcs)
    if args:
        arguments["args"] = _list("args", args)
    lines = ["torch_test(", f'    name = "{path.stem}",']
    for name in sorted(arguments):
        lines += arguments[name]
    lines += _list("deps", deps)
    return "\n".join(lines + [")"])


def placement(placed: dict[str, list]) -> str:
    """Per variant, the cases that land there."""
    lines = []
    for variant in variants.VARIANTS:
        ids = sorted(n for n, p in placed.items() if p[0] == variant)
        if ids:
            lines.append(f"# {variant}: {len(ids)} cases")
            lines += [f"#   {nodeid}" for nodeid in ids]
    homeless = sorted(n for n, p in placed.items() if p[0] is None)
    if homeless:
        lines.append(f"# no variant has the GPUs these need: {len(homeless)} cases")
        lines += [f"#   {nodeid}" for nodeid in homeless]
    return "\n".join(lines)


# An absolute path that folding left (under no root stable_text knows: a temporary directory)
# differs from run to run; not a path's end after unittest's `[N chars]`, which hid its start.
_VOLATILE = re.compile(r"(?<![\w.\]])/[^\s'\"]+")
_MAX_LITERAL = 80


def stable_prefix(text: str) -> str:
    """The start of `text` an entry can match literally: its first line (after any leading
    whitespace), folded as the runner folds it (stable_text), up to the first absolute path
    left, at most _MAX_LITERAL characters."""
    text = stable_text.fold(text)
    lead = len(text) - len(text.lstrip())
    end = text.find("\n", lead)
    end = len(text) if end < 0 else end
    volatile = _VOLATILE.search(text, lead, end)
    if volatile:
        end = volatile.start()
    return text[: min(end, lead + _MAX_LITERAL)].rstrip()


@dataclasses.dataclass
class Proposals:
    """What the measured cpu cases ask of the expectations file, and what no entry can say."""

    entries: list[dict]
    notes: list[str]


def _local(path: pathlib.Path, nodeid: str) -> str:
    return path.name + nodeid[nodeid.index("::") :] if "::" in nodeid else nodeid


def _fail_match(seen: dict) -> tuple[str | None, str]:
    """A fail's (or teardown's) literal `Type: message-prefix` for a failure the runner's
    witness read, or None and why not."""
    text = f"{seen['type']}: {seen['msg']}"
    kind = seen["type"]
    if not expectations._TYPE_NAME.fullmatch(kind):  # a class defined in a function
        kind = kind.rsplit(".", 1)[-1]
    prefix = stable_prefix(seen["msg"])
    if not seen["msg"]:
        match = kind  # no message at all (a bare assert): the type alone declares exactly that
    elif not expectations.long_enough(prefix):
        return None, f"{text[:200]!r}, a message too short to declare"
    else:
        match = f"{kind}: {prefix}"
    # The runner's own reading of the entry must accept what was measured.
    if expectations.Entry(0, "", "fail", "", match).matched(text) is None:
        return None, f"{text[:200]!r}, which no literal entry matches"
    return match, ""


def measured_runs(result: dict) -> list[tuple[str, dict]]:
    """(variant, its run's result): the cpu run, then each GPU variant's (measure_gpu_variants)."""
    return [("cpu", result), *result.get("gpu_runs", {}).items()]


def proposals(path: pathlib.Path, result: dict) -> Proposals:
    """Entries for the measured outcomes of `result` (tools/add_test_collect.py, --run) and of
    its GPU variants' runs, each entry for its variant: each skip with torch's own reason; each
    failure as a `fail` entry whose match is the literal start of its first failure, and each
    case that expected to fail (xfail, unittest.expectedFailure) and passed as a `pass` entry,
    both `proposed = true` so that a person decides; none for a case that failed as it
    expected to."""
    entries, notes = [], []
    for variant, run in measured_runs(result):
        _propose(path, run, variant, entries, notes)
    for variant, error in result.get("gpu_errors", {}).items():
        last = (error.strip().splitlines() or ["?"])[-1]
        notes.append(f"the {variant} cases could not be measured on this host: {last}")
    return Proposals(entries, notes)


def _propose(path: pathlib.Path, result: dict, variant: str, entries: list, notes: list) -> None:
    """proposals() for one variant's run."""
    shown = "" if variant == "cpu" else f" [{variant}]"
    for nodeid, reason in result.get("skips", []):
        literal = stable_prefix(reason)
        test = _local(path, nodeid)
        if not expectations.long_enough(literal):
            notes.append(f"{test}{shown}: skipped ({reason!r}), a reason too short to declare")
            continue
        entries.append(
            {
                "test": test,
                "outcome": "skip",
                "reason": literal,
                "match": literal,
                "variants": [variant],
            }
        )
    torch = f"torch {result['torch']}" if result.get("torch") else "this torch"
    for nodeid, first, later in result.get("fails", []):
        test = _local(path, nodeid)
        match, why = _fail_match(first)
        if match is None:
            notes.append(f"{test}{shown}: fails with {why}")
            continue
        entry = {
            "test": test,
            "outcome": "fail",
            "reason": f"fails on {torch} as measured by add_test",
            "match": match,
            "variants": [variant],
            "proposed": True,
        }
        if later is not None:  # a teardown error after the failure (a registry left dirty)
            entry["teardown"], why = _fail_match(later)
            if entry["teardown"] is None:
                notes.append(f"{test}{shown}: failed, then its teardown failed with {why}")
                continue
        entries.append(entry)
    for nodeid in result.get("xpassed", []):  # expected to fail (xfail / expectedFailure)
        entries.append(
            {
                "test": _local(path, nodeid),
                "outcome": "pass",
                "reason": f"expected to fail, passes on {torch} as measured by add_test",
                "variants": [variant],
                "proposed": True,
            }
        )


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def entry_text(entry: dict) -> str:
    """One [[expect]] entry as TOML, keys in the order expectations.py lists them."""
    lines = ["[[expect]]"]
    for key, value in entry.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, list):
            lines.append(f"{key} = [{', '.join(toml_string(v) for v in value)}]")
        else:
            lines.append(f"{key} = {toml_string(value)}")
    return "\n".join(lines) + "\n"


def expected_failures(result: dict) -> list[str]:
    """Cases that failed as they expected to: their target accepts that, with no entry."""
    return result.get("xfails", [])


def uncollected_classes(source: str, placed: dict[str, list]) -> list[str]:
    """Classes of `source` that define test methods of which no case was collected."""
    names = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        tests = [
            f.name
            for f in node.body
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name.startswith("test")
        ]
        # Device-type classes are collected as ClassCPU / ClassCUDA.
        if tests and not any(f"::{node.name}" in nodeid for nodeid in placed):
            names.append(f"{node.name} ({len(tests)} test methods)")
    return names


def measured_lines(result: dict) -> list[str]:
    """What the cases of each variant run here did, and how many GPU-variant cases did not run."""
    lines = [
        f"Measured on this host, {variant} cases: {len(run['skips'])} skipped, "
        f"{len(run['fails'])} failed, {len(expected_failures(run))} failed as they expected to "
        "(nothing to declare)"
        for variant, run in measured_runs(result)
    ]
    here = {variant for variant, _ in measured_runs(result)}
    missed = sum(1 for p in result["placed"].values() if p[0] is not None and p[0] not in here)
    if missed:
        lines.append(f"{missed} GPU-variant cases not run on this host")
    return lines


def report(path: pathlib.Path, result: dict, env: Environment, ran: bool) -> tuple[str, int]:
    """The printed report and the exit status."""
    placed = result["placed"]
    out = [f"# {path.name}: collected with {env.described}, GPUs hidden (as the cpu variant)"]
    out += [f"# its {v} cases ran as the {v} target runs them" for v in result.get("gpu_runs", {})]
    if result["errors"]:
        out.append("# CANNOT BE COLLECTED ON THIS HOST: the stanza below is not measured.")
        out += ["# " + line for e in result["errors"] for line in e.splitlines()[-15:]]
    lost = uncollected_classes(path.read_text(), placed)
    if lost:
        out.append(
            "# DEFINES TESTS NOTHING COLLECTS (no target would run them): " + ", ".join(lost)
        )
    if not placed and not result["errors"]:
        out.append("# NO TEST CASES: pytest collects nothing from this file.")
    deps = add_test_deps.labels_for(result, path, ROOT, env.manifest)
    proposed = proposals(path, result)
    out.append(stanza(path, placed, deps.labels, bool(proposed.entries), args=stanza_args(result)))
    if ran and not result["errors"]:
        out += [f"# {line}" for line in crash_notes(result)]
    out += [f"# deps: {note}" for note in deps.notes]
    out.append("# Placement (cases per variant; each variant is a target):")
    out.append(placement(placed) or "#   none")
    if ran:
        out += [f"# {line}" for line in measured_lines(result)]
        out += [f"# {note}" for note in proposed.notes]
        if proposed.entries:
            out.append(f"# Review, then save as {path.stem}.expectations.toml beside the file:")
            out.append("\n".join(entry_text(e) for e in proposed.entries))
    return "\n".join(out), 1 if result["errors"] else 0


def stanza_args(result: dict) -> list[str]:
    """The pytest arguments the stanza passes: those a measuring run of any variant needed
    (collect's `pytest_args`; a stanza's args reach every variant's target)."""
    return next((r["pytest_args"] for _, r in measured_runs(result) if r.get("pytest_args")), [])


def runs_alone(result: dict) -> bool:
    """Whether a measured file needs a target of its own: a run of one of its variants did not
    end normally (in a pack, the process it ends would take the other files' cases with it), or
    it runs only with pytest arguments of its own (stanza_args)."""
    ended = all(r.get("exit", 0) in ENDED_NORMALLY for _, r in measured_runs(result))
    return not ended or bool(stanza_args(result))


def crash_notes(result: dict) -> list[str]:
    """What a reader of the stanza must know of a measuring run that did not end normally, the
    cpu variant's or a GPU variant's."""
    notes = []
    for variant, run in measured_runs(result):
        shown = "" if variant == "cpu" else f"the {variant} cases' run: "
        notes += [shown + line for line in _crash_notes(run)]
    return notes


def _crash_notes(result: dict) -> list[str]:
    """crash_notes() of one variant's run."""
    if result.get("crashed_with_defaults"):
        crash = result["crashed_with_defaults"]
        return [
            f"PYTEST CRASHED (INTERNALERROR, exit {crash['exit']}) after {crash['started']} of "
            f"{len(result['placed'])} cases; with {' '.join(result['pytest_args'])} (Python's "
            f"traceback formatter, not pytest's) it ran {result['started']}: the stanza passes it"
        ]
    code = result.get("exit", 0)
    if code in ENDED_NORMALLY:
        return []
    if code == PYTEST_CRASHED:
        return [
            f"PYTEST CRASHED (INTERNALERROR) after {result.get('started', 0)} of "
            f"{len(result['placed'])} cases, with {' '.join(NATIVE_TRACEBACKS)} too: its later "
            "cases never ran; it runs alone, so no other file's cases are lost with it"
        ]
    return [
        f"PYTEST ENDED ABNORMALLY (exit status {code}): its later cases never ran; it runs "
        "alone, so no other file's cases are lost with it"
    ]


def tests_environment() -> Environment:
    """@pypi's environment: as fetched already (no Bazel command), else fetched now."""
    return fetched_pypi() or pypi_environment()


def main(argv: list[str]) -> int:
    if any(pathlib.Path(a).is_dir() for a in argv if not a.startswith("--")):
        from tools import add_test_dir

        return add_test_dir.main(argv)
    files = [a for a in argv if not a.startswith("--")]
    if len(files) != 1 or set(argv) - {*files, "--no-run"}:
        raise SystemExit(__doc__)
    path = pathlib.Path(files[0]).resolve()
    env = tests_environment()
    run = "--no-run" not in argv
    result = collect(path, env, run)
    if run:
        measure_gpu_variants(path, env, result, probe.visible_gpu_count())
    text, status = report(path, result, env, run)
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
