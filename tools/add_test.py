"""Prints the torch_test stanza for a test file, and what it measured to get there.

    python3 tools/add_test.py path/to/test_x.py [--no-run]     (from any directory)
    python3 tools/add_test.py DIR [--no-run] [--jobs N] [--remeasure]     (writes DIR's files)

For a directory, tools/addtest/directory_mode.py writes DIR/BUILD.bazel and the expectations
files of every test_*.py in it, and of each sub-folder's (a package each), measuring the files
in parallel; a re-run measures again only the files whose content changed since
(tools/addtest/record.py; --remeasure: every file) and updates only what changed. The modules
are the package tools/addtest/ (its __init__ says which does what).

Collects the file the way its targets will, in the tests' own environment: @pypi's, which
`tools/bazel` fetches (the pinned lock, or the host interpreter when TORCH_TEST_PYTHON is set),
so a fresh clone whose python3 has no torch works. The child (tools/addtest/collect.py) hides
the GPUs, as the cpu variant does, loads the variant plugin, and reports every case's variant
and features (our markers and torch's own decorators,
tools/runner/session/upstream_decorators.py), the
modules the file loaded, and (unless --no-run) the skips of the cases this host runs. On a host
with GPUs, the cases of each GPU variant it has enough GPUs for run too, in a child of that
variant's environment, one such child at a time (no two measuring runs share a GPU).
Prints:
  - the stanza: variants, nccl / triton, deps (tools/addtest/deps.py: from the modules loaded;
    every label exists in @pypi's manifest or a BUILD file), expectations when cases skipped;
  - per variant, the cases that land there;
  - what the cases did (unless --no-run), as expectations entries of their variant to review:
    skips with their reason, failures as `fail` entries and expected failures that passed as
    `pass` entries, both with `proposed = true` (the runner refuses one until a person removes
    that line); expected failures that failed need none;
  - plainly, when the file cannot be collected on this host, or defines tests nothing collects.
Exit status 1 when the file cannot be collected here (the stanza would be a guess).
"""

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # from any directory

from tools.addtest import directory_mode, file_mode  # noqa: E402


def main(argv: list[str]) -> int:
    """Reads the command line (the usage above), then file mode or directory mode."""
    args = list(argv)
    jobs = os.cpu_count() or 1
    if "--jobs" in args:
        at = args.index("--jobs")
        jobs = int(args[at + 1])
        del args[at : at + 2]
    names = [a for a in args if not a.startswith("--")]
    if len(names) != 1 or set(args) - {*names, "--no-run", "--remeasure"}:
        raise SystemExit(__doc__)
    path = pathlib.Path(names[0])
    run = "--no-run" not in args
    if path.is_dir():
        return directory_mode.main(path, run, jobs, remeasure="--remeasure" in args)
    if "--jobs" in argv or "--remeasure" in args:
        raise SystemExit(__doc__)
    return file_mode.main(path.resolve(), run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
