"""Prints the torch_test stanza for a test file: its variants and features, and its deps.

    python3 tools/add_test.py path/to/test_x.py     (run from anywhere; prints to stdout)

Variants and nccl / triton come from collecting the file the way its targets will: pytest with
the variant plugin, so our markers and torch's own decorators
(tools/runner/session/upstream_decorators.py)
place each test, in a child process with the GPUs hidden (as the cpu variant sees them). The
interpreter is $TORCH_TEST_PYTHON, else this one; it needs what the file imports. Deps come from
the file's imports. Review the stanza: a dependency the file reaches only indirectly is not seen.
"""

import ast
import json
import os
import pathlib
import subprocess
import sys

from tools.hardware import envvars, probe, variants

PLUGIN = "tools.runner.session.plugin"
# The child's one line of output the parent reads: each test's variant and features.
PLACEMENT = "torch_test placement: "

ROOT = pathlib.Path(__file__).resolve().parents[1]
# test_utils modules and the library that holds each.
_TEST_UTILS = {
    "hardware": "hardware",
    "distributed": "distributed",
    "multiprocess_testcase": "distributed",
    "rank_process": "distributed",
    "dtensor": "dtensor",
    "dynamo": "dynamo",
    "numerics": "numerics",
    "versions": "versions",
}


def deps_of(source: str) -> list[str]:
    """Bazel deps for the modules `source` imports (absolute imports only)."""
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
            if node.module == "test_utils":
                modules.update(f"test_utils.{alias.name}" for alias in node.names)
    deps = set()
    for module in modules:
        top, _, rest = module.partition(".")
        if module.startswith("torch.testing._internal"):
            deps.add("//test_utils:torch_testing")
        elif top == "test_utils" and rest.split(".")[0] in _TEST_UTILS:
            deps.add("//test_utils:" + _TEST_UTILS[rest.split(".")[0]])
        elif top not in sys.stdlib_module_names and top != "test_utils":
            deps.add("@pypi//:" + top.lower().replace("_", "-"))
    if "//test_utils:torch_testing" in deps:
        deps.discard("@pypi//:torch")  # torch_testing brings it
    return sorted(deps)


def _collect(path: pathlib.Path) -> dict[str, list]:
    """{node id: [variant, [features]]} of every test in `path`, from a child pytest."""
    python = os.environ.get(envvars.PYTHON) or sys.executable
    env = {k: v for k, v in os.environ.items() if not k.startswith(envvars.PREFIX)}
    path_entries = [str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    env.update(
        CUDA_VISIBLE_DEVICES="",
        PYTHONPATH=os.pathsep.join(path_entries),
        PYTHONDONTWRITEBYTECODE="1",
    )
    out = subprocess.run(
        [python, __file__, "--collect", str(path)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    marker = PLACEMENT
    lines = [line for line in out.stdout.splitlines() if line.startswith(marker)]
    if out.returncode or not lines:
        raise SystemExit(f"collecting {path} failed:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    return json.loads(lines[-1][len(marker) :])


def _child_collect(path: str) -> None:
    import pytest

    placed = {}

    class Recorder:
        # The plugin is loaded by name, as the runner loads it: tools do not import test_utils.
        def pytest_configure(self, config):
            self.plugin = config.pluginmanager.get_plugin(PLUGIN)

        def pytest_deselected(self, items):
            self._record(items)

        def pytest_collection_finish(self, session):
            self._record(session.items)

        def _record(self, items):
            for item in items:
                req = self.plugin.requirements(item)
                placed[item.nodeid] = [req.variant, sorted(req.features)]

    code = pytest.main(
        [path, "--collect-only", "-q", "-p", "no:cacheprovider", "-p", PLUGIN],
        plugins=[Recorder()],
    )
    print(PLACEMENT + json.dumps(placed))
    sys.exit(0 if code in (0, pytest.ExitCode.NO_TESTS_COLLECTED) else int(code))


def _list(name: str, values: list[str]) -> list[str]:
    if not values:
        return []
    if len(values) == 1:
        return [f'    {name} = ["{values[0]}"],']
    return [f"    {name} = ["] + [f'        "{v}",' for v in values] + ["    ],"]


def stanza(path: pathlib.Path, placed: dict[str, list], deps: list[str]) -> str:
    used_variants = [v for v in variants.VARIANTS if any(p[0] == v for p in placed.values())]
    lines = ["torch_test(", f'    name = "{path.stem}",']
    if used_variants != ["cpu"]:
        lines += _list("variants", used_variants)
    for feature in probe.FEATURES:
        used = [
            v for v in used_variants if any(p[0] == v and feature in p[1] for p in placed.values())
        ]
        lines += _list(feature, used)
    lines += _list("deps", deps)
    return "\n".join(lines + [")"])


def main(argv: list[str]) -> None:
    if argv[:1] == ["--collect"]:
        _child_collect(argv[1])
        return
    if len(argv) != 1:
        raise SystemExit(__doc__)
    path = pathlib.Path(argv[0]).resolve()
    sys.path.insert(0, str(ROOT))
    print(stanza(path, _collect(path), deps_of(path.read_text())))


if __name__ == "__main__":
    main(sys.argv[1:])
