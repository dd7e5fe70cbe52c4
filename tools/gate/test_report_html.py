"""The gate's page (report.html) from a report.json's data: what it counts is what report.json
holds, every section in its place, every value text, a few MB at 5,000 cases.

Standard library only: the page is a pure function of the data.
"""

import copy
import json
import re
import unittest

from tools.gate import page_sample, report_html

OUT = "/tmp/gate-report"
SUFFIXES = {"cpu": "", "gpu": "_gpu", "multi_gpu": "_multi_gpu", "gpu_x4": "_gpu_x4"}
LEADING = ["verdict", "compared", "regressions", "grid", "culprits", "fixes", "infra"]
LEADING.append("declared")
CATEGORIES = ("regressions", "infra", "one_side", "fixes", "declared", "other_changes")
CATEGORIES += ("xfail_message_changes", "new_cases", "vanished_cases")


def _page(data: dict) -> str:
    # Through JSON, as the page's data is report.json's.
    return report_html.page(json.loads(json.dumps(data)), OUT, SUFFIXES)


class PageTest(unittest.TestCase):
    def setUp(self):
        self.data = page_sample.sample(5000, OUT)
        self.text = _page(self.data)
        self.marks = report_html.marks(self.text)

    def test_the_counts_shown_are_report_json_s(self):
        result = self.data["comparison"]
        counts = self.marks["counts"]
        for key in CATEGORIES:
            self.assertEqual(set(counts[key]), {len(result[key])}, key)
        for key in ("targets", "targets_compared", "cases_compared"):
            self.assertEqual(counts[key], [result["coverage"][key]], key)
        self.assertEqual(counts["target_status"], [len(self.data["target_status"])])
        self.assertEqual(self.marks["regressions"], len(result["regressions"]))
        self.assertEqual(counts["culprits"], [2])  # the flaky one is not bisected
        # One row per case (or whole target) a category lists: the sample lists 15.
        self.assertEqual(counts["grid-rows"], [15])
        self.assertEqual(self.marks["grid_rows"], 15)
        self.assertEqual(self.marks["shown"], 15)

    def test_every_section_in_order(self):
        sections = self.marks["sections"]
        self.assertEqual(sections[: len(LEADING)], LEADING)
        self.assertIn("one-side", sections)
        self.assertIn(self.data["comparison"]["regressions"][0]["reproduce"], self.marks["text"])
        self.assertIn(
            "logs/candidate/dynamo_tests/test_aot_autograd/shard_1_run_1_attempt_1/test.log",
            self.text,  # under the report directory: linked relative to it
        )
        self.assertNotIn(f'href="{OUT}/logs', self.text)

    def test_a_declared_outcome_is_called_declared_not_a_quarantine(self):
        # The sample's declared cases are declared fails, no flaky entry (a quarantine has
        # `until`): the count row, the grid and their section say "declared".
        compared = self.text[self.text.index('<section id="compared">') :]
        self.assertIn("<th>declared</th>", compared[: compared.index("</section>")])
        self.assertIn('<td class="cell decl"', self.text)
        self.assertNotIn('<td class="cell quar"', self.text)
        declared = self.text[self.text.index('<section id="declared">') :]
        self.assertIn("<h2>Declared outcomes on the candidate", declared)
        self.assertIn("<td>declared</td>", declared[: declared.index("</section>")])

    def test_text_stays_text(self):
        self.assertIn(page_sample.HOSTILE_CASE, self.marks["text"])
        self.assertNotIn("<script>alert", self.text)
        self.assertNotIn("<b>bold</b>", self.text)
        self.assertEqual(self.text.count("<script>"), 1)  # the page's own filter
        # Nothing to fetch: no external script, style, font or image.
        for needle in ("http://", "https://", " src=", "<link", "@import", "url("):
            self.assertNotIn(needle, self.text)

    def test_the_culprit_is_outlined_at_its_release(self):
        timeline = self.text[self.text.index('<section id="culprits">') :]
        timeline = timeline[: timeline.index("</section>")]
        self.assertIn("2.14.1<br><span class=note>first changed: 1", timeline)
        self.assertIn("2.15.0<br><span class=note>first changed: 1", timeline)
        self.assertIn("2.14.0<br><span class=note>first changed: 0", timeline)
        rows = timeline.split("<tr>")[2:]
        self.assertEqual(len(rows), 2)
        for row in rows:
            self.assertEqual(row.count("culprit"), 1, row)
        self.assertIn("not bisected: flaky", timeline)

    def test_a_few_mb_at_5000_cases_even_if_every_case_regressed(self):
        self.assertLess(len(self.text.encode()), 1_000_000)
        data = copy.deepcopy(self.data)
        first = data["comparison"]["regressions"][0]
        data["comparison"]["regressions"] = [
            dict(
                copy.deepcopy(first),
                case=f"AotAutogradFallbackTests::test_case_{i}",
                reproduce=first["reproduce"].replace("test_aot_sequence_nr", f"test_case_{i}"),
            )
            for i in range(5000)
        ]
        text = _page(data)
        self.assertLess(len(text.encode()), 5_000_000)
        # Counted in the text: the parser takes seconds over 5 MB on a loaded host.
        self.assertEqual(len(re.findall(r'<(?:article|tr) [^>]*id="regression-', text)), 5000)
        self.assertIn('data-count="culprits">5000<', text)
        self.assertIn('<tr id="regression-5000"><td>5000</td>', text)
        self.assertIn("test_case_4999", text)

    def test_an_older_report_json_has_no_infra_section_and_empty_lists_say_none(self):
        data = copy.deepcopy(self.data)
        del data["comparison"]["infra"]
        for row in data["target_status"].values():
            row.pop("baseline_cases", None)
            row.pop("candidate_cases", None)
        data["comparison"]["fixes"] = []
        text = _page(data)
        found = report_html.marks(text)
        self.assertNotIn("infra", found["sections"])
        self.assertNotIn("infra", found["counts"])
        self.assertEqual(found["counts"]["fixes"], [0, 0])
        fixes = text[text.index('<section id="fixes">') :]
        self.assertIn('<p class="none">None.</p>', fixes[: fixes.index("</section>")])

    def test_nothing_changed(self):
        data = copy.deepcopy(self.data)
        for key in CATEGORIES:
            data["comparison"][key] = []
        data["exit_code"] = 0
        found = report_html.marks(_page(data))
        self.assertEqual(found["regressions"], 0)
        self.assertEqual(found["grid_rows"], 0)
        self.assertIn("complete, no regressions (exit 0)", found["text"])
        self.assertIn("None: no regression was bisected", found["text"])

    def test_a_target_s_variant_from_its_suffix(self):
        cases = {
            "//d:test_a": ("//d:test_a", "cpu"),
            "//d:test_a_gpu": ("//d:test_a", "gpu"),
            "//d:test_a_multi_gpu": ("//d:test_a", "multi_gpu"),
            "//d:test_a_gpu_x4": ("//d:test_a", "gpu_x4"),
        }
        for label, want in cases.items():
            self.assertEqual(report_html.variant_of(label, SUFFIXES), want, label)


if __name__ == "__main__":
    unittest.main()
