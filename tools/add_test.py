"""Prints the torch_test stanza for a test file, and what it measured to get there.

    python3 tools/add_test.py path/to/test_x.py [--no-run]     (from any directory)

Collects the file the way its targets will, in the tests' own environment: @pypi's, which
`tools/bazel` fetches (the pinned lock, or the host interpreter when TORCH_TEST_PYTHON is set),
so a fresh clone whose python3 has no torch works. The child (tools/add_test_collect.py) hides
the GPUs, as the cpu variant does, loads the variant plugin, and reports every case's variant
and features (our markers and torch's own decorators,
tools/runner/session/upstream_decorators.py), the
modules the file loaded, and (unless --no-run) the skips of the cases this host runs.
Prints:
  - the stanza: variants, nccl / triton, deps (tools/add_test_deps.py: from the modules loaded;
    every label exists in @pypi's manifest or a BUILD file), expectations when cases skipped;
  - per variant, the cases that land there;
  - the skips measured, as expectations entries with their `match`, to review;
  - plainly, when the file cannot be collected on this host, or defines tests nothing collects.
Exit status 1 when the file cannot be collected here (the stanza would be a guess).
"""

import ast
import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as `python3 tools/add_test.py` from any directory

from tools import add_test_collect, add_test_deps  # noqa: E402
from tools.hardware import envvars, probe, variants  # noqa: E402

COLLECTOR = ROOT / "tools" / "add_test_collect.py"
# As the cpu variant's environment (CPU_ENV in tools/build_defs/variants.bzl) hides them.
_HIDDEN_GPUS = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}


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
    repo = pathlib.Path(base, "external", "pypi")
    manifest = json.loads((repo / "manifest.json").read_text())
    mode = "host interpreter " + os.environ.get(envvars.PYTHON, "")
    described = mode if manifest.get("mode") == "host" else "@pypi's pinned lock"
    site = repo / "site"
    return Environment(str(repo / "venv" / "bin" / "python3"), site, manifest, described)


def collect(path: pathlib.Path, env: Environment, run: bool) -> dict:
    """tools/add_test_collect.py's result for `path`, in `env`."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(envvars.PREFIX)}
    entries = [str(ROOT), *([str(env.site)] if env.site and env.site.is_dir() else [])]
    entries += filter(None, [child_env.get("PYTHONPATH")])
    child_env.update(
        _HIDDEN_GPUS,
        PYTHONPATH=os.pathsep.join(entries),
        PYTHONDONTWRITEBYTECODE="1",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    command = [env.python, str(COLLECTOR), str(path), *(["--run"] if run else [])]
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
    path: pathlib.Path, placed: dict[str, list], deps: list[str], expectations: bool = False
) -> str:
    used_variants = [v for v in variants.VARIANTS if any(p[0] == v for p in placed.values())]
    lines = ["torch_test(", f'    name = "{path.stem}",']
    if used_variants != ["cpu"]:
        lines += _list("variants", used_variants)
    for feature in probe.FEATURES:
        used = [
            v for v in used_variants if any(p[0] == v and feature in p[1] for p in placed.values())
        ]
        lines += _list(feature, used)
    if expectations:
        lines.append(f'    expectations = "{path.stem}.expectations.toml",')
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


def expectation_entries(path: pathlib.Path, skips: list[list[str]]) -> str:
    """The measured skips as [[expect]] entries (node ids without the file's directories)."""
    blocks = []
    for nodeid, reason in skips:
        test = path.name + nodeid[nodeid.index("::") :] if "::" in nodeid else nodeid
        first_line = reason.strip().splitlines()[0] if reason.strip() else reason
        blocks.append(
            "[[expect]]\n"
            f"test = {json.dumps(test)}\n"
            'outcome = "skip"\n'
            f"reason = {json.dumps(first_line)}\n"
            f"match = {json.dumps(re.escape(first_line[:80]))}\n"
            'variants = ["cpu"]\n'
        )
    return "\n".join(blocks)


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


def report(path: pathlib.Path, result: dict, env: Environment, ran: bool) -> tuple[str, int]:
    """The printed report and the exit status."""
    placed = result["placed"]
    out = [f"# {path.name}: collected with {env.described}, GPUs hidden (as the cpu variant)"]
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
    skips = result["skips"]
    out.append(stanza(path, placed, deps.labels, expectations=bool(skips)))
    out += [f"# deps: {note}" for note in deps.notes]
    out.append("# Placement (cases per variant; each variant is a target):")
    out.append(placement(placed) or "#   none")
    if ran:
        gpu_cases = sum(1 for p in placed.values() if p[0] not in (None, "cpu"))
        out.append(
            f"# Skips measured on this host (cpu cases; {gpu_cases} GPU-variant cases not run "
            f"here): {len(skips)}"
        )
        if skips:
            out.append(f"# Review, then save as {path.stem}.expectations.toml beside the file:")
            out.append(expectation_entries(path, skips))
    return "\n".join(out), 1 if result["errors"] else 0


def main(argv: list[str]) -> int:
    files = [a for a in argv if not a.startswith("--")]
    if len(files) != 1 or set(argv) - {*files, "--no-run"}:
        raise SystemExit(__doc__)
    path = pathlib.Path(files[0]).resolve()
    env = pypi_environment()
    run = "--no-run" not in argv
    text, status = report(path, collect(path, env, run), env, run)
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
