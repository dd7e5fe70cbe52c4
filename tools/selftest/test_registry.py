"""The registry names every check of tools/selftest, and each command it names is there: CI runs
the registry alone (.ci/run), so a check left out of it would never run."""

import pathlib
import unittest

from tools.selftest import needs, registry

HERE = pathlib.Path(__file__).parent  # runfiles: the check files are its data
ROOT = HERE.parents[1]


def registered() -> set[str]:
    """The files the registry's commands run: scripts by path, modules by their file."""
    files = set()
    for check in registry.CHECKS:
        for word in check.argv:
            if word.startswith("tools."):
                files.add(word.replace(".", "/") + ".py")
            elif "/" in word:
                files.add(word)
    return files


class Registry(unittest.TestCase):
    def test_every_check_file_is_registered(self):
        checks = {
            f"tools/selftest/{p.name}" for p in HERE.glob("check_*") if p.suffix in (".py", ".sh")
        }
        self.assertTrue(checks, "no check files beside the registry")
        self.assertEqual(sorted(checks - registered()), [])

    def test_registered_selftest_files_exist(self):
        mine = [f for f in registered() if f.startswith("tools/selftest/")]
        self.assertEqual([f for f in mine if not (ROOT / f).is_file()], [])

    def test_names_needs_and_bases(self):
        names = [c.name for c in registry.CHECKS]
        self.assertEqual(len(names), len(set(names)))
        for check in registry.CHECKS:
            self.assertTrue(set(check.needs) <= set(needs.NEEDS), check.name)
            self.assertIn(check.base, ("none", "workspace", "scratch", "own"), check.name)
            self.assertTrue(check.what and "\n" not in check.what, check.name)


if __name__ == "__main__":
    unittest.main()
