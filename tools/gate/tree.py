"""The exact source tree a run ran: its base commit and the tree of the working directory as is.

    tree.state(root)   # {"commit": HEAD, "tree": id of the files as they are, "dirty": bool}

The tree is what `git write-tree` gives for the working directory with every edit and every
untracked file that is not ignored, written through a temporary index (GIT_INDEX_FILE), so the
real index and the working directory stay as they were; the blobs and the tree land in the
repository's object store, which is what lets the same repository find them later. `dirty`:
that tree is not HEAD's. The same content committed has the same tree id, so two runs ran the
same sources exactly when their trees are equal, whatever their commits.
"""

import os
import pathlib
import subprocess
import tempfile


def _git(root: pathlib.Path, *args: str, env=None) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, env=env
        )
    except OSError:  # no git here
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def state(root: pathlib.Path) -> dict:
    """{"commit", "tree", "dirty"}; None values where `root` is not a git checkout."""
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    with tempfile.TemporaryDirectory(prefix="gate_tree.") as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=str(pathlib.Path(tmp) / "index"))
        # Start from HEAD's entries (or none), then take the working directory as it is.
        ready = _git(root, "read-tree", *([head] if head else ["--empty"]), env=env) is not None
        added = ready and _git(root, "add", "-A", env=env) is not None
        tree = _git(root, "write-tree", env=env) if added else None
    head_tree = _git(root, "rev-parse", f"{head}^{{tree}}") if head else None
    return {"commit": head, "tree": tree, "dirty": None if tree is None else tree != head_tree}


def known(root: pathlib.Path, tree: str | None) -> bool:
    """Whether this repository holds `tree` (a dirty tree saved elsewhere is not here)."""
    return bool(tree) and _git(root, "cat-file", "-e", f"{tree}^{{tree}}") is not None


def _said(state: dict) -> str:
    dirty = ", dirty: uncommitted changes" if state.get("dirty") else ""
    return f"tree {state.get('tree')} (commit {state.get('commit')}{dirty})"


def warnings(states: dict, saved: dict, known) -> list[str]:
    """What a reader of a comparison must know about the trees the sides ran.

    states: {role: {"commit", "tree", "dirty"}} of each side (a saved run's record, or the
    checkout's); saved: {role: directory} of the saved runs; known(tree) -> bool: this
    repository holds it. A comparison goes on (the results are what they are); it says so.
    """
    said = []
    for role, where in saved.items():
        state = states[role]
        if not state.get("tree"):
            said.append(
                f"the {role} saved run {where} records no tree (saved outside a git checkout, "
                "or before trees were recorded): what sources it ran cannot be told "
                f"(commit {state.get('commit')})"
            )
            continue
        if state.get("dirty"):
            said.append(f"the {role} saved run {where} ran uncommitted changes: {_said(state)}")
        if not known(state["tree"]):
            said.append(
                f"the {role} saved run's tree {state['tree']} is not in this repository: "
                "the sources it ran cannot be looked at here"
            )
    trees = {role: state.get("tree") for role, state in states.items()}
    if saved and len(set(trees.values())) > 1:
        said.append(
            "the sides ran different trees ("
            + ", ".join(f"{role} {tree}" for role, tree in trees.items())
            + "): a difference may come from the sources, not from torch or the hardware"
        )
    return said


def bisect_refusal(states: dict, saved: dict, here: dict) -> str | None:
    """Why --bisect cannot go on, or None: it runs each regressed case on the checkout's tree
    (`here`) and names the torch release that changed it, so a saved side must have run exactly
    that tree (dirty or not: an equal tree id is the same sources), or a change of the sources
    would be blamed on a release."""
    for role, where in saved.items():
        state = states[role]
        if not state.get("tree") or state["tree"] != here.get("tree"):
            ran = _said(state) if state.get("tree") else "no recorded tree"
            return (
                f"--bisect runs the regressed cases on this checkout's {_said(here)}, but the "
                f"{role} saved run {where} ran {ran}: a release would be named for what the "
                "sources changed. Gate without --bisect, or bisect from the tree it ran"
            )
    return None
