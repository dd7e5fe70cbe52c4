"""No self-test edits the workspace: the files git sees, before and after.

    python3 -m tools.selftest.tree_state save STATE     # before the self-tests (.ci/run)
    python3 -m tools.selftest.tree_state check STATE    # after: exit 1 naming each changed file

The state is the content digest of every file git lists (tracked, local edits included, and
untracked ones it does not ignore) and the tracked files that are gone. Ignored paths (a
check's own scratch package, bazel-* links) are not the tree's and are left out.
"""

import hashlib
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _listed(*options: str, root: pathlib.Path) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", *options], cwd=root, check=True, capture_output=True
    ).stdout
    return [name for name in out.decode().split("\0") if name]


def state(root: pathlib.Path = ROOT) -> dict[str, str]:
    """{path: sha256 of its bytes, or "deleted"} for every file git sees in ROOT."""
    files = {}
    for name in _listed("--cached", "--others", "--exclude-standard", root=root):
        path = root / name
        if path.is_symlink():
            files[name] = "link:" + str(path.readlink())
        elif path.is_file():
            files[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    for name in _listed("--deleted", root=root):
        files[name] = "deleted"
    return files


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per file whose state differs: edited, added or removed."""
    lines = []
    for name in sorted(set(before) | set(after)):
        if name not in before:
            lines.append(f"added {name}")
        elif name not in after or after[name] == "deleted" != before[name]:
            lines.append(f"removed {name}")
        elif before[name] != after[name]:
            lines.append(f"edited {name}")
    return lines


def main(argv: list[str]) -> int:
    command, path = argv
    if command == "save":
        pathlib.Path(path).write_text(json.dumps(state(), indent=0, sort_keys=True))
        return 0
    lines = changed(json.loads(pathlib.Path(path).read_text()), state())
    for line in lines:
        print(f"tree_state: {line}")
    if lines:
        print("tree_state: a self-test changed the workspace's files (see above)")
        return 1
    print("tree_state: the workspace's files are as they were")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
