"""Self-tests of the CI case counter (tools/ci/summarize_testlogs.py)."""

import contextlib
import io
import json
import pathlib
import tempfile
import unittest

from tools.ci import summarize_testlogs
from tools.results import junit, record

LABEL = "//pkg:t"


def _xml(path: pathlib.Path, passed: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    cases = "".join(f'<testcase name="c{i}"/>' for i in range(passed))
    path.write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    return path.as_uri()


def _result(shard: int, uri: str) -> str:
    return json.dumps(
        {
            "id": {"testResult": {"label": LABEL, "run": 1, "shard": shard, "attempt": 1}},
            "testResult": {
                "status": "PASSED",
                "testActionOutput": [{"name": "test.xml", "uri": uri}],
            },
        }
    )


class SummarizeTest(unittest.TestCase):
    def test_accepted_skips_are_counted_by_why(self):
        self.assertEqual(summarize_testlogs.COLUMNS, record.COLUMNS)
        xml = (
            '<testcase classname="m" name="a"><properties><property name="torch_test.declared"'
            ' value="skip: r"/></properties><skipped message="r"/></testcase>'
            '<testcase classname="m" name="b"><properties><property name="torch_test.declared"'
            ' value="fail: r"/></properties><skipped type="pytest.xfail" message="r"/></testcase>'
            '<testcase classname="m" name="c"><properties><property name="torch_test.not_'
            'applicable" value="needs mps"/></properties><skipped message="x"/></testcase>'
            '<testcase classname="m" name="d"><skipped message="x"/></testcase>'
            '<testcase classname="m" name="e"><skipped type="pytest.xfail" message="x"/></testcase>'
            '<testcase classname="m" name="f"><failure message="[XPASS(strict)] x"/></testcase>'
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp, "test.xml")
            path.write_text(f"<testsuites><testsuite>{xml}</testsuite></testsuites>")
            self.assertEqual(
                junit.shard_counts(path),
                {"declared": 2, "n/a": 1, "skipped": 1, "xfail": 1, "failed": 1},
            )

    def test_counts_only_the_invocations_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            base = pathlib.Path(tmp, "pkg", "t")
            # Leftovers of earlier invocations, newer on disk: must not be counted.
            for run in (1, 2, 3):
                _xml(base / f"shard_1_of_2_run_{run}_of_3" / "test.xml", 5)
            _xml(base / "test.xml", 7)
            events = [
                json.dumps(
                    {
                        "id": {"targetConfigured": {"label": LABEL}},
                        "configured": {"testSize": "SMALL"},
                    }
                ),
                _result(1, _xml(base / "shard_1_of_2" / "test.xml", 1)),
                _result(2, _xml(base / "shard_2_of_2" / "test.xml", 3)),
                json.dumps(
                    {
                        "id": {"testSummary": {"label": LABEL}},
                        "testSummary": {"overallStatus": "PASSED"},
                    }
                ),
            ]
            path = pathlib.Path(tmp, "events.json")
            path.write_text("\n".join(events) + "\n")
            target = summarize_testlogs.bep.read(path)[LABEL]
            self.assertEqual(summarize_testlogs.count_cases(target)["passed"], 4)

    def test_skipped_targets_cases_counted_from_a_sibling_that_ran(self):
        with tempfile.TemporaryDirectory() as tmp:
            base = pathlib.Path(tmp, "pkg", "t")
            xml = _xml(base / "test.xml", 2)
            log = base / "test.log"
            log.write_text(
                "...\ntorch_test placement: cpu=2 gpu=3 multi_gpu=4 (this target: cpu)\n"
            )
            events = [
                json.dumps(
                    {
                        "id": {"testResult": {"label": LABEL, "run": 1, "shard": 1, "attempt": 1}},
                        "testResult": {
                            "status": "PASSED",
                            "testActionOutput": [
                                {"name": "test.xml", "uri": xml},
                                {"name": "test.log", "uri": log.as_uri()},
                            ],
                        },
                    }
                ),
                json.dumps(
                    {
                        "id": {"testSummary": {"label": LABEL}},
                        "testSummary": {"overallStatus": "PASSED"},
                    }
                ),
            ]
            for label in (LABEL, LABEL + "_gpu", LABEL + "_multi_gpu"):
                events.insert(
                    0,
                    json.dumps(
                        {
                            "id": {"targetConfigured": {"label": label}},
                            "configured": {"testSize": "SMALL"},
                        }
                    ),
                )
            for label in (LABEL + "_gpu", LABEL + "_multi_gpu"):
                events.append(
                    json.dumps(
                        {
                            "id": {"targetCompleted": {"label": label}},
                            "aborted": {"reason": "SKIPPED"},
                        }
                    )
                )
            path = pathlib.Path(tmp, "events.json")
            path.write_text("\n".join(events) + "\n")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                summarize_testlogs.main(str(path))
            lines = out.getvalue().splitlines()
        self.assertIn(
            "test cases not run on this host (2 SKIPPED targets): 7 (gpu 3, multi_gpu 4)", lines
        )
        rows = [line.split() for line in lines if line.startswith(LABEL + "_")]
        self.assertEqual(
            [r[:3] for r in rows],
            [[LABEL + "_gpu", "SKIPPED", "3"], [LABEL + "_multi_gpu", "SKIPPED", "4"]],
        )
        self.assertEqual(lines[-1], "2 passed, 0 failed, 0 skipped")


if __name__ == "__main__":
    unittest.main()
