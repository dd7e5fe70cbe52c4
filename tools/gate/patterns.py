"""Whether a label is among Bazel target patterns, for the targets a saved run holds.

A live side's `bazel test PATTERNS` runs what the patterns select; a saved run holds what its
own command ran, often more (a pool's whole `//...` against a few packages re-run here). The
gate compares a saved run's targets only where the patterns select them, or every target the
saved run has beyond the live side's would read as "ran on one side only". Hand-written: Bazel
answers this with a query, but a saved run's targets may no longer exist in this tree, so the
patterns are read as Bazel reads them, left to right, `-` subtracting:
  //...  //pkg/...  //pkg:all  //pkg:*  //pkg:all-targets  //pkg:name  //pkg (= //pkg:pkg),
and the same without the leading // (relative to the workspace root, where the gate runs).
"""


def _parts(pattern: str) -> tuple[str, str]:
    """(package, target) of a pattern; target "..." for a recursive one, "*" for all."""
    body = pattern[2:] if pattern.startswith("//") else pattern
    package, _, target = body.partition(":")
    if package == "..." or package.endswith("/..."):
        return package[: -len("...")].rstrip("/"), "..."
    if target in ("all", "*", "all-targets"):
        return package, "*"
    return package, target or package.rsplit("/", 1)[-1]


def _selects(pattern: str, label: str) -> bool:
    package, target = _parts(pattern)
    label_package, _, label_target = label.removeprefix("//").partition(":")
    if target == "...":
        return not package or label_package == package or label_package.startswith(package + "/")
    return label_package == package and target in ("*", label_target)


def matches(label: str, patterns: list[str]) -> bool:
    """Whether `label` (//pkg:name) is selected by `patterns`, as `bazel test` reads them."""
    selected = False
    for pattern in patterns:
        if pattern.startswith("-"):
            selected = selected and not _selects(pattern[1:], label)
        else:
            selected = selected or _selects(pattern, label)
    return selected
