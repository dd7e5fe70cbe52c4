"""bench/ reaches tools/ only through what its modules export on purpose, and every bench has a
smoke run in the self-test registry.

A bench may import a module of ALLOWED only, and use only the names that module lists in its
`__all__` (read from its source: nothing is imported); a private name (`_x`) never. Code that
a bench hands a child interpreter (`python -c "..."`) counts too. Runs outside Bazel (it reads
bench/): `python3 -m tools.selftest bench`.
"""

import ast
import functools
import pathlib

import pytest

from tools.selftest import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHES = sorted(p for p in (ROOT / "bench").iterdir() if p.suffix in (".py", ".sh"))
# Parts of other benches, no bench of their own: each runs through the benches that use it.
PARTS = {
    "lib.sh": "every .sh bench",
    "plain_env.py": "host_suite.py, scale.py, cpu_suite.py",
    "stress_report.py": "stress.sh",
}
# The tools/ modules bench/ may import.
ALLOWED = {
    "tools.addtest.merge",
    "tools.gate.infra",
    "tools.gate.rates",
    "tools.hardware.envvars",
    "tools.hardware.probe",
    "tools.hardware.spec",
    "tools.hardware.table",
    "tools.python.host_mode",
    "tools.results.bep",
    "tools.results.facts",
    "tools.results.junit",
    "tools.results.record",
    "tools.runner.bytecode",
    "tools.runner.process.kernel_cache",
    "tools.runner.process.private_dirs",
    "tools.runner.process.vec_isa_memo",
    "tools.runner.session.child",
    "tools.update_test_times",
}
# Any module's attribute, not a name it exports: where its file is (to run it as a script).
ANY_MODULE = {"__file__"}


def is_module(dotted: str) -> bool:
    path = ROOT / dotted.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def uses(tree: ast.AST) -> list[tuple[str, str, int]]:
    """(module, name, line) for each tools/ name the code uses: `from tools.m import n`, and
    `m.n` where m is a tools/ module imported under that name."""
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tools"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if is_module(full):
                    aliases[alias.asname or alias.name] = full
                else:
                    found.append((node.module, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tools.") and alias.asname:
                    aliases[alias.asname] = alias.name
                elif alias.name.startswith("tools."):
                    found.append((alias.name, "", node.lineno))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            found.append((aliases[node.value.id], node.attr, node.lineno))
    found += [(module, "", 0) for module in aliases.values()]
    return found


def child_code(tree: ast.AST) -> list[ast.AST]:
    """The string constants that are Python importing tools/ (code for `python -c`)."""
    trees = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "import" in node.value and "tools." in node.value:
                try:
                    trees.append(ast.parse(node.value))
                except SyntaxError:
                    continue  # prose that mentions an import
    return trees


@functools.cache
def exported(module: str) -> set[str] | None:
    path = ROOT / module.replace(".", "/")
    path = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return None


def reaches(source: str) -> list[tuple[str, str, int]]:
    tree = ast.parse(source)
    return uses(tree) + [use for code in child_code(tree) for use in uses(code)]


def refusals(source: str) -> list[str]:
    wrong = []
    for module, name, line in reaches(source):
        if module not in ALLOWED:
            wrong.append(f"line {line}: {module} is not on bench's allow-list")
        elif name.startswith("_") and name not in ANY_MODULE:
            wrong.append(f"line {line}: {module}.{name} is private")
        elif name and name not in ANY_MODULE and name not in (exported(module) or ()):
            wrong.append(f"line {line}: {module}.{name} is not in its __all__")
    return wrong


@pytest.mark.parametrize("bench", [p for p in BENCHES if p.suffix == ".py"], ids=lambda p: p.name)
def test_bench_uses_only_what_tools_export(bench):
    assert refusals(bench.read_text()) == []


def test_allowed_modules_exist_and_export():
    assert [m for m in sorted(ALLOWED) if not is_module(m) or exported(m) is None] == []


def test_a_private_name_is_refused():
    source = "from tools.results import bep\nbep._parse(1)\n"
    assert refusals(source) == ["line 2: tools.results.bep._parse is private"]


def test_a_name_left_out_of_all_is_refused():
    source = "from tools.results.bep import not_exported\n"
    assert refusals(source) == ["line 1: tools.results.bep.not_exported is not in its __all__"]


def test_a_module_off_the_list_is_refused():
    source = 'CODE = "from tools.runner import verdict; verdict.judge()"\n'
    assert refusals(source)[0] == "line 1: tools.runner.verdict is not on bench's allow-list"


def test_every_bench_has_a_smoke_run():
    argvs = [" ".join(check.argv) for check in registry.CHECKS]
    smoked = {b.name for b in BENCHES if any(f"bench/{b.name}" in argv for argv in argvs)}
    assert sorted(b.name for b in BENCHES if b.name not in smoked | set(PARTS)) == []
