"""Measuring a test file: tools/addtest/collect.py run in the tests' environment as one
variant's target runs it, again with Python's traceback formatter where pytest crashed, and then
as each GPU variant the host has the GPUs for.

In pinned mode the cases run with the site their target will have (tools/addtest/closure.py):
the distributions of the deps the file's collection needs. What the file's code then looks for
in vain and the lock has (an import only a test body makes, a `find_spec` probe) is added and
the file runs again, so the deps proposed from that run are what its cases use, and its
target's outcomes are the ones measured."""

import json
import os
import pathlib
import subprocess
import tempfile

from tools.addtest import closure
from tools.addtest import collect as collect_child
from tools.addtest import deps as deps_of
from tools.addtest.environment import ROOT, Environment
from tools.hardware import envvars, spec, table, variants
from tools.runner import collection

COLLECTOR = ROOT / "tools" / "addtest" / "collect.py"

# pytest's exit statuses of a run that ended as it should: all passed, some failed, none
# selected (every case another variant's: upstream's test_fake.py has one, a GPU case).
ENDED_NORMALLY = (0, 1, 5)
# pytest's exit status when it crashed itself (INTERNALERROR), its later cases never run.
PYTEST_CRASHED = 3
# Formatting a failure's traceback is where pytest itself crashes on real files (CPython 3.11's
# "AST constructor recursion depth mismatch" in its source-range lookup); Python's own
# formatter does not parse source, so the file can run to its end.
NATIVE_TRACEBACKS = ["--tb=native"]


def collect(
    path: pathlib.Path, env: Environment, run: bool, variant: str = "cpu", host_gpus: int = 0
) -> dict:
    """tools/addtest/collect.py's result for `path`, in `env`, as `variant`'s target runs it
    (a GPU variant's on a host of `host_gpus`), in the site its target will have (pinned mode).
    result["added"]: {distribution: [what the file looked for of it]} the run needed beyond
    what collecting it loaded."""
    if not (run and env.site and env.manifest.get("mode") == "lock"):
        return _crash_safe(path, env, env.site, run, variant, host_gpus)
    collected = _collect(path, env, env.site, False, [])
    labels = deps_of.labels_for(collected, path, ROOT, env.manifest).labels
    names = closure.distributions(labels, collected["requires"], ROOT)
    added = {}
    with tempfile.TemporaryDirectory(prefix="add_test_site_") as scratch:
        while True:
            view = closure.link(env.site, names, pathlib.Path(scratch, str(len(added))))
            result = _crash_safe(path, env, view, True, variant, host_gpus)
            found = closure.owners(env.site, set(result["missed"]))
            new = {dist for dist in found.values() if dist not in names}
            if not new:
                break
            for module, dist in sorted(found.items()):
                if dist in new:
                    added.setdefault(dist, []).append(module)
            # A dependency's label brings what it requires: so does the site measured next.
            names = closure.with_requirements(names | new, collected["requires"])
    result["added"] = added
    return result


def _crash_safe(path, env, site, run, variant, host_gpus) -> dict:
    """A run that pytest ended with an INTERNALERROR is measured again with Python's traceback
    formatter; if that run ends normally, its result is the file's and `pytest_args` says what
    the stanza must pass."""
    result = _collect(path, env, site, run, [], variant, host_gpus)
    if run and result.get("exit") == PYTEST_CRASHED:
        again = _collect(path, env, site, run, NATIVE_TRACEBACKS, variant, host_gpus)
        if again.get("exit") != PYTEST_CRASHED:
            again["crashed_with_defaults"] = {"started": result["started"], "exit": result["exit"]}
            return again
    return result


def together(paths: list[pathlib.Path], env: Environment, labels, requires) -> dict:
    """collect.py's cpu result for `paths` run in one process, as a pack's target runs them,
    in the site that target will have (pinned mode: the distributions of its deps `labels`;
    `requires`: a collection's requirement closure)."""
    if not (env.site and env.manifest.get("mode") == "lock"):
        return _collect(paths, env, env.site, True, [])
    names = closure.distributions(labels, requires, ROOT)
    with tempfile.TemporaryDirectory(prefix="add_test_site_") as scratch:
        view = closure.link(env.site, names, pathlib.Path(scratch, "pack"))
        return _collect(paths, env, view, True, [])


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
    path: pathlib.Path | list[pathlib.Path],
    env: Environment,
    site: pathlib.Path | None,
    run: bool,
    pytest_args: list[str],
    variant: str = "cpu",
    host_gpus: int = 0,
) -> dict:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(envvars.PREFIX)}
    entries = [str(ROOT), *([str(site)] if site and site.is_dir() else [])]
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
    paths = path if isinstance(path, list) else [path]
    command = [env.python, str(COLLECTOR), *map(str, paths), *(["--run"] if run else [])]
    command += ["--", *pytest_args] if pytest_args else []
    out = subprocess.run(command, env=child_env, cwd=ROOT, capture_output=True, text=True)
    prefix = collect_child.RESULT_PREFIX
    lines = [line for line in out.stdout.splitlines() if line.startswith(prefix)]
    if not lines:
        raise SystemExit(
            f"collecting {path} with {env.described} failed:\n"
            f"{out.stdout[-3000:]}{out.stderr[-3000:]}"
        )
    return json.loads(lines[-1][len(prefix) :])


def measured_runs(result: dict) -> list[tuple[str, dict]]:
    """(variant, its run's result): the cpu run, then each GPU variant's (measure_gpu_variants)."""
    return [("cpu", result), *result.get("gpu_runs", {}).items()]
