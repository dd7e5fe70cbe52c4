"""Unit tests of the self-tests' own tools: the tree guard (tree_state.py) and the scratch
copy's sync (harness.py), on throw-away git repositories."""

import pathlib
import subprocess
import tempfile
import unittest

from tools.selftest import harness, tree_state


def _git_repo(root: pathlib.Path) -> None:
    def git(*args):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)

    git("init", "-q")
    (root / ".gitignore").write_text("/scratch/\n")
    (root / "tracked.py").write_text("X = 1\n")
    (root / "sub").mkdir()
    (root / "sub" / "tool.sh").write_text("echo hi\n")
    (root / "sub" / "tool.sh").chmod(0o755)
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "files")


class TreeStateTest(unittest.TestCase):
    def setUp(self):
        self.root = pathlib.Path(self.enterContext(tempfile.TemporaryDirectory()))
        _git_repo(self.root)
        self.before = tree_state.state(self.root)

    def after(self) -> list[str]:
        return tree_state.changed(self.before, tree_state.state(self.root))

    def test_unchanged_and_ignored_writes_pass(self):
        (self.root / "scratch").mkdir()
        (self.root / "scratch" / "BUILD.bazel").write_text("x")
        self.assertEqual(self.after(), [])

    def test_edit_of_a_tracked_file_is_named(self):
        with open(self.root / "tracked.py", "a") as f:
            f.write("# edited\n")
        self.assertEqual(self.after(), ["edited tracked.py"])

    def test_edit_then_restore_passes(self):
        text = (self.root / "tracked.py").read_text()
        (self.root / "tracked.py").write_text("other")
        (self.root / "tracked.py").write_text(text)
        self.assertEqual(self.after(), [])

    def test_added_and_removed_files_are_named(self):
        (self.root / "new.py").write_text("")
        (self.root / "sub" / "tool.sh").unlink()
        self.assertEqual(self.after(), ["added new.py", "removed sub/tool.sh"])


class SyncTest(unittest.TestCase):
    def test_copy_holds_the_files_git_lists_and_only_rewrites_changes(self):
        with tempfile.TemporaryDirectory() as tmp:
            source, copy = pathlib.Path(tmp, "ws"), pathlib.Path(tmp, "copy")
            source.mkdir()
            _git_repo(source)
            (source / "untracked.py").write_text("u")
            (source / "scratch").mkdir()
            (source / "scratch" / "ignored").write_text("i")
            files = harness.workspace_files(source)
            self.assertEqual(files, [".gitignore", "sub/tool.sh", "tracked.py", "untracked.py"])
            self.assertEqual(harness.sync(source, files, copy), 4)
            self.assertEqual((copy / "sub/tool.sh").stat().st_mode & 0o777, 0o755)
            # The copy edited, a stray file added: sync undoes both, and nothing else.
            (copy / "tracked.py").write_text("edited")
            (copy / "sub" / "stray.txt").write_text("s")
            self.assertEqual(harness.sync(source, files, copy), 2)
            self.assertEqual((copy / "tracked.py").read_text(), "X = 1\n")
            self.assertFalse((copy / "sub" / "stray.txt").exists())
            self.assertEqual(harness.sync(source, files, copy), 0)


if __name__ == "__main__":
    unittest.main()
