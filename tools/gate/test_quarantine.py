"""Self-tests of the gate's reading of a quarantine (a flaky entry, tools/gate/quarantine.py):
records as the runner writes them, over several runs of a side.

Standard library only, no torch and no Bazel.
"""

import pathlib
import tempfile
import unittest

from tools.gate import compare, page_sample, quarantine, report_html
from tools.results import bep, record

ENTRY = {
    "entry": 1,
    "test": "m.py::C::test_flaky",
    "issue": "https://example.org/issues/64",
    "until": "2999-12-31",
}


def target(root: pathlib.Path, side: str, outcomes: list, rate=0.05, quarantined=True):
    """A target of one case, run once per outcome ("passed", "quarantined", "failed"), each
    run's test.xml holding the runner's record."""
    label = "//pkg:t"
    found = bep.Target(label, status="PASSED", shard_count=1)
    for run, outcome in enumerate(outcomes, 1):
        d = root / side / f"run_{run}"
        d.mkdir(parents=True)
        (d / "test.log").write_text("")
        rec = record.ShardRecord(verdict=record.PASSED)
        detail = "AssertionError: flaked again" if outcome != "passed" else ""
        entry = dict(ENTRY, rate=rate) if quarantined else None
        reason = "a race" if outcome == "quarantined" else None
        rec.cases["m.py::C::test_flaky"] = record.Case(outcome, detail, reason, quarantine=entry)
        xml = d / "test.xml"
        record.write(xml, rec)
        outputs = {"test.log": d / "test.log", "test.xml": xml}
        found.attempts.append(bep.Attempt(1, run, 1, "PASSED", False, 0.1, outputs))
    return {label: found}


class QuarantineTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = pathlib.Path(tmp.name)

    def compared(self, baseline: list, candidate: list, rate=0.05, **kwargs) -> dict:
        before = compare.snapshot(target(self.root, "b", baseline, rate, **kwargs))
        after = compare.snapshot(target(self.root, "c", candidate, rate))
        return compare.compare(before, after)

    def test_a_quarantined_failure_is_no_regression_and_is_listed_with_its_entry(self):
        result = self.compared(["passed"] * 3, ["passed", "quarantined", "passed"], rate=0.2)
        self.assertEqual(result["regressions"], [])
        (item,) = result["declared"]
        self.assertEqual(
            item["declared"],
            "flaky (issue https://example.org/issues/64, until 2999-12-31, rate 0.2): "
            "failed 1 of 3 runs",
        )
        self.assertEqual((item["quarantine"]["failures"], item["quarantine"]["runs"]), (1, 3))
        self.assertFalse(item["quarantine"]["exceeds"])

    def test_failures_beyond_the_stated_rate_are_a_regression(self):
        # 3 of 3 at a stated 5%: P = 0.05 ** 3, far below 1 - 0.99.
        result = self.compared(["passed"] * 3, ["quarantined"] * 3)
        (item,) = result["regressions"]
        self.assertTrue(item["quarantine"]["exceeds"])
        self.assertEqual(
            item["message"],
            "flaky (issue https://example.org/issues/64, until 2999-12-31, rate 0.05): "
            "failed 3 of 3 runs, above its rate (P = 0.00013 < 0.01)",
        )
        self.assertEqual(result["declared"], [])

    def test_one_failure_in_one_run_is_within_any_rate_above_a_hundredth(self):
        result = self.compared(["passed"], ["quarantined"], rate=0.02)
        self.assertEqual(result["regressions"], [])
        self.assertFalse(result["declared"][0]["quarantine"]["exceeds"])

    def test_a_failure_newly_quarantined_on_the_candidate_is_a_regression(self):
        result = self.compared(["passed"], ["quarantined"], quarantined=False)
        (item,) = result["regressions"]
        self.assertTrue(item["newly_declared"].startswith("flaky (issue "))

    def test_enough_clean_runs_propose_ending_the_quarantine(self):
        # 1 - 0.01 ** (1 / n) < 0.05 from n = 90 on.
        self.assertIsNone(quarantine.judged(dict(ENTRY, rate=0.05, runs=89, failures=0))["remove"])
        result = self.compared(["passed"], ["passed"] * 90)
        (item,) = result["declared"]
        self.assertEqual(
            item["quarantine"]["remove"],
            "90 clean runs bound the rate below 0.05: remove the entry",
        )
        self.assertTrue(
            item["declared"].endswith("; 90 clean runs bound the rate below 0.05: remove the entry")
        )

    def test_a_failure_bars_the_proposal(self):
        judged = quarantine.judged(dict(ENTRY, rate=0.05, runs=500, failures=1))
        self.assertIsNone(judged["remove"])

    def test_the_binomial_tail(self):
        self.assertAlmostEqual(quarantine.tail(0, 5, 0.3), 1.0)
        self.assertAlmostEqual(quarantine.tail(2, 3, 0.5), 0.5)
        self.assertAlmostEqual(quarantine.tail(3, 3, 0.1), 0.001)

    def test_the_page_shows_it_as_a_quarantine_among_the_declared_outcomes(self):
        result = self.compared(["passed"] * 3, ["passed", "quarantined", "passed"], rate=0.2)
        data = page_sample.sample(300, "/tmp/gate-report")
        data["comparison"]["declared"] = result["declared"]
        page = report_html.page(data, "/tmp/gate-report", {"cpu": ""})
        section = page[page.index('<section id="declared">') :]
        section = section[: section.index("</section>")]
        self.assertIn("issue https://example.org/issues/64, until 2999-12-31, rate 0.2", section)
        self.assertIn("failed 1 of 3 runs", section)
        # Its kind: a flaky entry, not a declared fail or skip.
        self.assertIn("<td>quarantine</td>", section)
        self.assertIn('<td class="cell quar"', page)
        self.assertNotIn('<td class="cell decl"', page)


if __name__ == "__main__":
    unittest.main()
