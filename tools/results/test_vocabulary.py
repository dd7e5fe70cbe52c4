"""One case vocabulary: the record's outcome words are written in tools/results/record.py alone.

Every other module from the runner to the gate's report names an outcome by record.py's
constants, so a new outcome touches one file and no reader re-encodes one in its own words.
Run from the repository root, outside Bazel (it reads the tree): the self-test `plumbing`.
"""

import pathlib
import re
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
OWNER = pathlib.Path("tools/results/record.py")
# Words only the record uses: quoted anywhere, they are an outcome spelled out.
RECORD_ONLY = ("declared_fail", "declared_skip", "quarantined", "never_ran", "not_applicable")
# Words pytest shares: an outcome where the line speaks of one.
SHARED = ("passed", "failed", "xfail", "xpass", "skipped", "error")
_QUOTED = r"""["'](%s)["']"""
_RECORD_ONLY = re.compile(_QUOTED % "|".join(RECORD_ONLY))
_SHARED = re.compile(_QUOTED % "|".join(SHARED))
_OUTCOME = re.compile(r"\boutcome|\bcolumn")
# pytest's own TestReport keeps pytest's words (the session's outcome audit sets them).
_PYTEST_REPORT = re.compile(r"\breport\.outcome\b")


def _product_files():
    for top in ("tools", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            parts = set(rel.parts)
            if rel == OWNER or parts & {"tests", "fixtures", "testdata"}:
                continue
            if rel.name.startswith("test_") or rel.name == "page_sample.py":
                continue  # tests, and the page tests' sample data
            yield rel


def spelled_out() -> list[str]:
    """`path:line: text` of every outcome word written outside record.py."""
    found = []
    for rel in _product_files():
        for n, line in enumerate((ROOT / rel).read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            said = _SHARED.search(code) and _OUTCOME.search(code)
            if _RECORD_ONLY.search(code) or (said and not _PYTEST_REPORT.search(code)):
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


class VocabularyTest(unittest.TestCase):
    def test_the_record_owns_its_outcome_words(self):
        self.assertEqual(spelled_out(), [])

    def test_the_check_sees_a_word_spelled_out(self):
        self.assertTrue(_RECORD_ONLY.search('case.outcome == "never_ran"'))
        self.assertTrue(_SHARED.search("'passed' if c.stale else c.outcome"))
        self.assertTrue(_OUTCOME.search("'passed' if c.stale else c.outcome"))
        self.assertTrue(_PYTEST_REPORT.search('report.outcome = "skipped"'))


if __name__ == "__main__":
    unittest.main()
