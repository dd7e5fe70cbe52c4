"""The gate through real Bazel, on the tiny targets of tools/gate/fixtures (no torch in them).

    python3 tools/gate/selftest_bazel.py        # ~2-3 min on 2 busy cores; CI runs it

Both sides are the pinned lock (one output base, results read after each side's run); the
fixtures misbehave on the candidate side only, told by a role file this test writes before each
side's `bazel test` (Gate.run is wrapped to do it). Checks what fake BEP/XML pairs cannot: what
Bazel 4.2.3 and pytest really write for a FLAKY target, a TIMEOUT in a red target (SIGTERM's
nameless testcase), a re-run of a parametrized id with a space, and a case that ran on the
baseline only.
"""

import contextlib
import io
import json
import pathlib
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from tools.gate import gate  # noqa: E402

FIXTURES = "//tools/gate/fixtures"


class GateThroughBazel(unittest.TestCase):
    def _gate(self, *targets: str) -> tuple[int, dict, str]:
        tmp = pathlib.Path(tempfile.mkdtemp(prefix="gate_selftest."))
        self.addCleanup(shutil.rmtree, tmp, True)
        state = tmp / "state"
        state.mkdir()
        original = gate.Gate.run

        def run(self, side, *args, **kwargs):
            (state / "role").write_text(side.role)
            return original(self, side, *args, **kwargs)

        argv = [
            "--baseline=pinned",
            "--candidate=pinned",
            f"--out={tmp / 'report'}",
            f"--bazel-arg=--test_env=GATE_FIXTURE_DIR={state}",
            f"--bazel-arg=--sandbox_writable_path={state}",
            "--bazel-arg=--nocache_test_results",
            "--bazel-arg=--test_timeout=25",
            *targets,
        ]
        gate.Gate.run = run
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                code = gate.main(argv)
        finally:
            gate.Gate.run = original
        report = tmp / "report"
        return code, json.loads((report / "report.json").read_text()), err.getvalue()

    def test_flaky_hang_and_parametrized_id(self):
        code, data, err = self._gate(
            f"{FIXTURES}:flaky_on_candidate",
            f"{FIXTURES}:hangs_on_candidate",
            f"{FIXTURES}:param_fails_on_candidate",
        )
        regressions = {
            (r["target"].split(":")[-1], (r["case"] or "").split("::")[-1]): r
            for r in data["comparison"]["regressions"]
        }
        self.assertEqual(code, gate.EXIT_REGRESSION, err)
        # FLAKY on the candidate: a (flaky) regression, not green.
        flaky = regressions[("flaky_on_candidate", "test_flaky")]
        self.assertEqual(flaky.get("flaky_attempts"), "failed 1 of 2 attempts")
        # A red baseline does not hide the hang; the hung case is named with its stack, and
        # pytest's nameless testcase after SIGTERM is no new case.
        hang = regressions[("hangs_on_candidate", "test_hangs")]
        self.assertIn("this test was running when it was stopped", hang["message"])
        self.assertIn("test_hangs", hang["stack"])
        self.assertEqual(
            [
                c
                for c in data["comparison"]["new_cases"]
                if c["target"].endswith("hangs_on_candidate")
            ],
            [],
        )
        # The re-runs select the id with a space and prove they ran it.
        param = regressions[("param_fails_on_candidate", "test_param[relu inplace]")]
        self.assertEqual(
            param["confirmation"], {"verdict": "consistent", "failed_runs": 3, "runs": 3}
        )
        self.assertNotIn(("param_fails_on_candidate", "test_param[plain]"), regressions)
        # Evidence stays in the report directory.
        for item in (hang, param):
            self.assertIn("/logs/", item["log"])
            self.assertTrue(pathlib.Path(item["log"]).is_file())
            self.assertTrue(item["rerun_logs"])
            self.assertIn("--test_env=TORCH_TEST_NODE_IDS=", param["reproduce"])

    def test_a_case_that_ran_on_one_side_only_is_incomplete(self):
        code, data, err = self._gate(f"{FIXTURES}:case_vanishes_on_candidate")
        self.assertEqual(code, gate.EXIT_INCOMPLETE, err)
        self.assertEqual(
            [(i["case"].split("::")[-1], i["reason"]) for i in data["comparison"]["one_side"]],
            [("test_mode[gone]", "vanished on the candidate")],
        )
        self.assertEqual(data["comparison"]["coverage"]["cases_compared"], 1)


if __name__ == "__main__":
    unittest.main()
