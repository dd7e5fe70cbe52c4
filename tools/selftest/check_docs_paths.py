"""Every repository path the READMEs and docs/*.md name exists (DOCUMENTS below).

Read: the targets of Markdown links (relative to the document), and in `code spans` the words
that name the tree: a path from the root (`tools/bazel`, `bench/results/`: its first part is a
top-level entry of the tree), a code file named alone or by a path from elsewhere (`lock.py`,
`session/child.py`: some file of the tree ends so), a Bazel package (`//tools/selftest:probe`:
its folder has a BUILD file) and a module run with `-m` (`python3 -m tools.results.outcomes`).
Left alone: URLs, absolute and home paths, placeholders (`path/to/x.py`, `VENV/bin/python`,
`EVENTS.json`, the example `test_x.py`, `$OUT`, globs), paths relative to a folder the prose
names (`logs/`) and paths git ignores (made by a run: `bazel-testlogs/`, `user.bazelrc`).
No Bazel; seconds.

    python3 -m tools.selftest.check_docs_paths [FILE.md...]
"""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs/*.md", "tools/remote/README.md", "bench/results/README.md")

LINK = re.compile(r"\]\(([^)\s]+)\)")
SPAN = re.compile(r"`([^`\n]+)`")
CODE = (".py", ".sh", ".bzl")
PATHLIKE = re.compile(r"^[\w.\-]+(/[\w.\-]*)*$")
LABEL = re.compile(r"^//([\w.\-/]*)(?::[\w.\-/+]*)?$")
# A part in capitals (before its extension), path/to, the example test_x: filled in by the reader.
PLACEHOLDER = re.compile(r"(^|/)([A-Z][A-Z_0-9]*(\.\w+)?|path/to|test_x\w*\.py)(/|$)")


def listed(root: pathlib.Path) -> list[str]:
    """The files git lists (tracked and untracked, not ignored)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [f for f in out.split("\0") if f]


def ignored(root: pathlib.Path, path: str) -> bool:
    done = subprocess.run(["git", "check-ignore", "-q", path], cwd=root)
    return done.returncode == 0


def words(span: str):
    """The words of a code span, trailing punctuation off, each with the word before it."""
    previous = ""
    for word in span.split():
        word = word.rstrip(",;:)").lstrip("(")
        yield word, previous
        previous = word


def named(text: str):
    """(line number, kind, name) of each name of the tree TEXT holds (the module's docstring)."""
    for number, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(line):
            if not re.match(r"^(https?:|mailto:|#)", target):
                yield number, "link", target.split("#")[0]
        for span in SPAN.findall(line):
            for word, previous in words(span):
                if previous == "-m" and re.fullmatch(r"[a-z_]+(\.\w+)+", word):
                    yield number, "module", word
                elif LABEL.match(word):
                    package = LABEL.match(word).group(1).removesuffix("...").rstrip("/")
                    yield number, "package", package
                elif PATHLIKE.match(word) and not PLACEHOLDER.search(word):
                    yield number, "path", word


class Tree:
    def __init__(self, root: pathlib.Path):
        self.root = root
        self.files = listed(root)
        self.top = {f.split("/")[0] for f in self.files}

    def has_path(self, name: str) -> bool | None:
        """Whether NAME is in the tree; None where it names no path of the tree."""
        first = name.split("/")[0]
        if "/" in name and first in self.top:
            return (self.root / name).exists() or ignored(self.root, name.rstrip("/"))
        if name.endswith(CODE) and not name.startswith("."):
            return any(f == name or f.endswith("/" + name) for f in self.files)
        return None

    def has_package(self, name: str) -> bool | None:
        if not name or name.split("/")[0] not in self.top:
            return None  # //... or an example package
        folder = self.root / name
        return (folder / "BUILD.bazel").is_file() or (folder / "BUILD").is_file()

    def has_module(self, name: str) -> bool | None:
        if name.split(".")[0] not in self.top:
            return None  # not ours: python3 -m pytest, pip, venv
        base = self.root / name.replace(".", "/")
        return base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()


def problems(document: pathlib.Path, tree: Tree) -> list[str]:
    found = []
    relative = document.relative_to(tree.root)
    for number, kind, name in named(document.read_text()):
        if kind == "link":
            path = (document.parent / name).resolve()
            ok = path.exists() or ignored(tree.root, str(path.relative_to(tree.root)))
        else:
            ok = {"path": tree.has_path, "package": tree.has_package, "module": tree.has_module}[
                kind
            ](name)
        if ok is False:
            found.append(f"{relative}:{number}: {kind} {name!r} does not exist")
    return found


def main(argv: list[str]) -> int:
    documents = [pathlib.Path(a).resolve() for a in argv] or sorted(
        p for pattern in DOCUMENTS for p in ROOT.glob(pattern)
    )
    tree = Tree(ROOT)
    found = [line for doc in documents for line in problems(doc, tree)]
    for line in found:
        print(line, file=sys.stderr)
    print(f"check_docs_paths: {len(documents)} documents, {len(found)} missing path(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
