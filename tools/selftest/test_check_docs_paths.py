"""check_docs_paths on a throw-away git repository: what it reads as a name of the tree, and
which names it finds missing."""

import pathlib
import subprocess
import tempfile
import unittest

from tools.selftest import check_docs_paths

README = """\
Run `tools/run.sh` and `tools/gone.sh`; see [the guide](docs/guide.md), [gone](docs/gone.md),
[a section](#a-section) and [a site](https://example.com/x.md).
Put `path/to/test_x.py` or `test_x.py` in `VENV/bin/python`, reading `EVENTS.json`.
Targets: `//tools:probe`, `//tools/nowhere:probe`, `//pkg:example`, `tools/bazel test //...`.
Modules: `python3 -m tools.mod`, `python3 -m tools.missing_mod`, `python3 -m pytest`.
Bare names: `lock.py` (somewhere), `stale.sh` (nowhere), `report.md` (a run's output).
Paths from elsewhere: `session/` (the prose names its folder), `sub/child.py`, `sub/old.py`.
Made by a run: `user.bazelrc`, `bazel-testlogs/tools/probe/test.log`.
"""

MISSING = {
    (1, "path", "tools/gone.sh"),
    (1, "link", "docs/gone.md"),
    (4, "package", "tools/nowhere"),
    (5, "module", "tools.missing_mod"),
    (6, "path", "stale.sh"),
    (7, "path", "sub/old.py"),
}


class CheckDocsPaths(unittest.TestCase):
    def test_missing_names_and_only_those(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            files = {
                "README.md": README,
                ".gitignore": "/bazel-*\n/user.bazelrc\n",
                "docs/guide.md": "",
                "tools/run.sh": "",
                "tools/bazel": "",
                "tools/BUILD.bazel": "",
                "tools/mod.py": "",
                "tools/python/lock.py": "",
                "tools/runner/sub/child.py": "",
            }
            for name, text in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(text)
            subprocess.run(["git", "init", "-q"], cwd=root, check=True)
            tree = check_docs_paths.Tree(root)
            found = check_docs_paths.problems(root / "README.md", tree)
        expected = {f"README.md:{n}: {kind} {name!r} does not exist" for n, kind, name in MISSING}
        self.assertEqual(set(found), expected)


if __name__ == "__main__":
    unittest.main()
