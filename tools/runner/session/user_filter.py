"""The user's own filter: the one reason besides sharding that excuses a case that did not run.

The user's filter is what the user asked of this run, and nothing else: the target's `args` and
the command line of `bazel run ... -- ARGS` (both reach pytest on its command line, after the
runner's own options), Bazel's --test_filter (TESTBRIDGE_TEST_ONLY, test_filter.py) and
TORCH_TEST_NODE_IDS (node_ids.py). All are taken before pytest starts, the command line as the
test process hands it to pytest, then read with pytest's own parser (so `-kX`, `-k X` and the
last of several `-k` mean what they mean to pytest). Never from `config.option`, which an ini
file's addopts, PYTEST_ADDOPTS and any conftest's pytest_configure also set: a conftest's
`markexpr = "not slow"` deselects in pytest, and the runner judges what it left out as never
run, as it judges a conftest that drops items.

`-m` is matched against the markers the source declares on the case (its function's, class's,
module's and parameters', as pytest reads them from those objects) and `-k` against its names
and those markers, never against a marker a conftest or plugin added to the item
(`item.add_marker`): that is the conftest's selection again.
"""

import argparse
import os

from tools.runner.session import test_filter


class UserFilter:
    """The user's filter of one session, taken before pytest starts."""

    def __init__(self, args: list[str], env=os.environ, node_ids=None):
        self._args = list(args)  # the test process's pytest command line
        self._test_filter = env.get(test_filter.FILTER_ENV, "")
        self._wanted = node_ids.wanted if node_ids else None  # a NodeIdSelector's

    def left_out(self, config):
        """left_out(item): True when the user's filter excludes the item, evaluated with pytest's
        own matchers (not read from pytest_deselected, which any plugin can call for any item)."""
        from _pytest.mark import MarkMatcher
        from _pytest.mark.expression import Expression

        # The command line alone, with every option pytest knows by now (a conftest's too, so an
        # option's value is never taken for a -k), into a namespace of its own.
        given = config._parser.parse_known_args(self._args, namespace=argparse.Namespace())
        keyword = (given.keyword or "").lstrip()
        if self._test_filter:
            keyword = test_filter.composed(self._test_filter, keyword)
        by_keyword = Expression.compile(keyword) if keyword else None
        by_mark = Expression.compile(given.markexpr) if given.markexpr else None
        prefixes = tuple(given.deselect or [])
        wanted = self._wanted

        def left_out(item) -> bool:
            marks = source_marks(item)
            return bool(
                (by_keyword and not by_keyword.evaluate(_keywords(item, marks)))
                or (by_mark and not by_mark.evaluate(MarkMatcher.from_markers(marks)))
                or (prefixes and item.nodeid.startswith(prefixes))
                or (wanted is not None and item.nodeid not in wanted)
            )

        return left_out


def source_marks(item) -> list:
    """The marks the source declares on the case: on its function, its classes (and their
    bases), its module, and its parameters (`pytest.param(..., marks=...)`), read from those
    objects as pytest reads them. pytest's `iter_markers` yields these and also what
    `add_marker` put on the item or a parent."""
    import pytest
    from _pytest.mark.structures import get_unpacked_marks

    marks = []
    for node in item.listchain():
        if isinstance(node, (pytest.Module, pytest.Class, pytest.Function)):
            marks += get_unpacked_marks(node.obj)
    callspec = getattr(item, "callspec", None)
    return marks + list(callspec.marks if callspec else ())


def _keywords(item, marks):
    """pytest's -k matcher (KeywordMatcher.from_item) over the item's names, its function's
    attributes and the source's `marks`; without the item's extra keyword matches and added
    markers, which only a plugin or conftest sets."""
    import pytest
    from _pytest.mark import KeywordMatcher

    names = {
        node.name
        for node in item.listchain()
        if not isinstance(node, pytest.Session)
        and not (isinstance(node, pytest.Directory) and isinstance(node.parent, pytest.Session))
    }
    function = getattr(item, "function", None)
    if function is not None:
        names.update(function.__dict__)
    names.update(mark.name for mark in marks)
    return KeywordMatcher(names)
