"""tools/addtest/ stands in floors: each module imports only modules of the floors below it (no
import runs back up, so there is no circle), and none takes a sibling's private name. The
floors are the list in the package's docstring, read here, so the list cannot drift."""

import ast
import os
import pathlib
import re
import subprocess
import sys

from tools.addtest import environment

PACKAGE = environment.ROOT / "tools" / "addtest"
ENTRY = environment.ROOT / "tools" / "add_test.py"
_FLOOR_LINE = re.compile(r"^  ([a-z_]+\.py(?:, [a-z_]+\.py)*)  ")


def floors(package: pathlib.Path) -> dict[str, int]:
    """{module: its floor}, from the package docstring's list (first line: the ground floor)."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    found = {}
    for line in doc.splitlines():
        listed = _FLOOR_LINE.match(line)
        if listed:
            level = len(set(found.values()))
            found.update({name.removesuffix(".py"): level for name in listed[1].split(", ")})
    return found


def sibling_imports(path: pathlib.Path, package: str) -> tuple[set[str], list[str]]:
    """The package's modules `path` imports, and each private name it takes from one."""
    tree = ast.parse(path.read_text())
    modules, aliases, private = set(), {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == package:
            for alias in node.names:  # from tools.addtest import stanza [as x]
                modules.add(alias.name)
                aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + "."):
            module = node.module.removeprefix(package + ".")
            modules.add(module)
            private += [f"{module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(package + "."):
                    modules.add(alias.name.removeprefix(package + "."))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            if module and node.attr.startswith("_"):
                private.append(f"{module}.{node.attr}")
    return modules, private


def test_every_module_of_the_package_has_a_floor():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert set(floors(PACKAGE)) == modules


def test_no_module_imports_one_of_its_own_floor_or_above():
    level = floors(PACKAGE)
    upward = {
        module: sorted(m for m in imported if level[m] >= level[module])
        for module in level
        for imported in [sibling_imports(PACKAGE / f"{module}.py", "tools.addtest")[0]]
    }
    assert {m: up for m, up in upward.items() if up} == {}


def test_no_module_takes_a_private_name_of_another():
    taken = {m: sibling_imports(PACKAGE / f"{m}.py", "tools.addtest")[1] for m in floors(PACKAGE)}
    taken["add_test.py"] = sibling_imports(ENTRY, "tools.addtest")[1]
    assert {m: names for m, names in taken.items() if names} == {}


def test_importing_a_module_alone_loads_only_modules_below_it():
    # What the interpreter really loads (an import inside a function counts once it runs at
    # import time; the AST check above sees those that do not run).
    level = floors(PACKAGE)
    code = (
        "import importlib, sys; importlib.import_module('tools.addtest.' + sys.argv[1]); "
        "print(' '.join(n.split('.')[-1] for n in sys.modules if n.startswith('tools.addtest.')))"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for module in level:
        out = subprocess.run(
            [sys.executable, "-c", code, module],
            env=env,
            cwd=environment.ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        above = sorted(m for m in out if m != module and level[m] >= level[module])
        assert above == [], f"importing {module} loaded {above}"


def test_the_entry_script_imports_the_modes_and_nothing_of_theirs_below():
    modules, _ = sibling_imports(ENTRY, "tools.addtest")
    assert modules == {"file_mode", "directory_mode"}
