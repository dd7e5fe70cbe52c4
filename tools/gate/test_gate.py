"""Self-tests of the upgrade gate: fake test.xml pairs for every category, the report, bad input.

Standard library only, no torch and no Bazel: the comparison must hold whatever torch does.
"""

import argparse
import contextlib
import dataclasses
import io
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import types
import unittest

from tools.gate import (
    candidate,
    compare,
    culprit,
    gate,
    hardware,
    infra,
    patterns,
    rates,
    report,
    report_html,
    save_run,
    sides,
    tree,
    variant_plan,
)
from tools.results import bep, record


def _case(name: str, outcome: str, time_s: float = 0.1, message: str = "known", props="") -> str:
    child = {
        "passed": "",
        "failed": f'<failure message="AssertionError: {name} broke">tb</failure>',
        "error": '<error message="error in setup">tb</error>',
        "skipped": '<skipped type="pytest.skip" message="no reason"/>',
        "xfail": f'<skipped type="pytest.xfail" message="{message}"/>',
        "xpass": '<failure message="[XPASS(strict)] known"/>',
    }[outcome]
    if props:
        child = f'<properties><property name="{props[0]}" value="{props[1]}"/></properties>' + child
    return f'<testcase classname="m.C" name="{name}" file="m.py" time="{time_s}">{child}</testcase>'


class Fake:
    """Writes targets' test.xml/test.log like Bazel's testlogs and wraps them as bep.Targets."""

    def __init__(self, root: pathlib.Path):
        self.root = root

    def target(self, side: str, label: str, status: str, shards: list, log="") -> bep.Target:
        """Shards of pytest's JUnit cases (name, outcome[, seconds, message, property]) and no
        runner record: a run saved before the runner wrote one."""
        target = bep.Target(label, status=status, shard_count=len(shards))
        for shard, cases in enumerate(shards, 1):
            d = self.root / side / label.strip("/").replace(":", "/") / f"shard_{shard}"
            d.mkdir(parents=True)
            outputs = {"test.log": d / "test.log"}
            (d / "test.log").write_text(log)
            if cases is not None:
                xml = "".join(_case(*c) for c in cases)
                (d / "test.xml").write_text(
                    f"<testsuites><testsuite>{xml}</testsuite></testsuites>"
                )
                outputs["test.xml"] = d / "test.xml"
            duration = sum(c[2] if len(c) > 2 else 0.1 for c in cases or [])
            target.attempts.append(bep.Attempt(shard, 1, 1, status, False, duration, outputs))
        return target

    def recorded(
        self, side: str, label: str, cases: list, log="", status=None, **facts
    ) -> bep.Target:
        """One shard whose test.xml holds the runner's record: `cases` are (name, witnessed
        outcome[, seconds, detail, declared reason, stale]), `facts` the record's other fields. Its
        JUnit says every case that ran passed, as a test that rewrote pytest's reports would
        have it: the witness's outcome is the one that counts."""
        rec = record.ShardRecord(**facts)
        for name, outcome, *rest in cases:
            detail, declared, stale = (list(rest[1:]) + ["", None, None][len(rest[1:]) :])[:3]
            rec.cases[f"m.py::C::{name}"] = record.Case(outcome, detail, declared, stale)
        green = all(c.outcome in record.GREEN for c in rec.cases.values()) and not rec.problems
        rec.verdict = record.PASSED if green else record.FAILED
        ran = [(c[0], "passed", *c[2:3]) for c in cases if c[1] != "never_ran"]
        target = self.target(side, label, status or ("PASSED" if green else "FAILED"), [ran], log)
        record.write(target.attempts[0].xml, rec)
        return target


DECLARED = ("torch_test.declared", "skip: needs cuda")


class CompareTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        fake = Fake(pathlib.Path(tmp.name))
        t = "//pkg:t"
        self.before = compare.snapshot(
            {
                t: fake.target(
                    "b",
                    t,
                    "FAILED",
                    [
                        [("reg_fail", "passed"), ("reg_error", "passed"), ("fix", "failed")],
                        [
                            ("to_xpass", "xfail"),
                            ("to_xfail", "xpass"),
                            ("other", "passed"),
                            ("gone", "passed"),
                            ("slow", "passed", 4.0),
                            ("jitter", "passed", 1.0),
                            ("xfail_breaks", "xfail"),
                            ("still_failing", "failed"),
                            ("xfail_msg", "xfail", 0.1, "TypeError: x"),
                            ("declared_skip", "passed"),
                            ("skip_to_pass", "skipped"),
                        ],
                    ],
                ),
                "//pkg:green": fake.target(
                    "b", "//pkg:green", "PASSED", [[("a", "passed"), ("b", "passed")]]
                ),
                "//pkg:crash": fake.target("b", "//pkg:crash", "PASSED", [[("a", "passed")]]),
                "//pkg:missing_pkg": fake.target(
                    "b", "//pkg:missing_pkg", "PASSED", [[("a", "passed")]]
                ),
                "//pkg:same": fake.target("b", "//pkg:same", "PASSED", [[("a", "passed", 10.0)]]),
            }
        )
        self.after = compare.snapshot(
            {
                t: fake.target(
                    "c",
                    t,
                    "FAILED",
                    [
                        [("reg_fail", "failed"), ("reg_error", "error"), ("fix", "passed")],
                        [
                            ("to_xpass", "xpass"),
                            ("to_xfail", "xfail"),
                            ("other", "skipped"),
                            ("new_ok", "passed"),
                            ("new_bad", "failed"),
                            ("slow", "passed", 6.5),
                            ("jitter", "passed", 2.9),
                            ("xfail_breaks", "failed"),
                            ("still_failing", "failed"),
                            ("xfail_msg", "xfail", 0.1, "RuntimeError: y"),
                            ("declared_skip", "skipped", 0.1, "", DECLARED),
                            ("skip_to_pass", "passed"),
                        ],
                    ],
                ),
                "//pkg:green": fake.target("c", "//pkg:green", "PASSED", [[("a", "passed")]]),
                "//pkg:crash": fake.target(
                    "c",
                    "//pkg:crash",
                    "FAILED",
                    [None],
                    log="collected 1 item\nFatal Python error: Segmentation fault\n",
                ),
                "//pkg:missing_pkg": bep.Target("//pkg:missing_pkg", status="SKIPPED"),
                "//pkg:same": fake.target("c", "//pkg:same", "PASSED", [[("a", "passed", 13.0)]]),
            }
        )
        self.result = compare.compare(self.before, self.after)

    def _cases(self, key):
        return sorted(
            (i["target"], i["case"] and i["case"].split("::")[1]) for i in self.result[key]
        )

    def test_regressions(self):
        # Every case that passed (or xfailed) on the baseline and did not pass on the candidate,
        # whatever the targets' status: failed, error, skipped, absent from a red target; an
        # xpass (its body passed against its marker) that xfails is a pass that now xfails.
        self.assertEqual(
            self._cases("regressions"),
            [
                ("//pkg:crash", "a"),
                ("//pkg:t", "declared_skip"),
                ("//pkg:t", "gone"),
                ("//pkg:t", "new_bad"),
                ("//pkg:t", "other"),
                ("//pkg:t", "reg_error"),
                ("//pkg:t", "reg_fail"),
                ("//pkg:t", "to_xfail"),
                ("//pkg:t", "xfail_breaks"),
            ],
        )
        crash = next(i for i in self.result["regressions"] if i["target"] == "//pkg:crash")
        self.assertEqual(crash["message"], "Fatal Python error: Segmentation fault")
        self.assertTrue(crash["log"].endswith("test.log"))
        reg = next(i for i in self.result["regressions"] if i["case"] == "m.C::reg_fail")
        self.assertEqual(reg["message"], "AssertionError: reg_fail broke")
        self.assertEqual(reg["node_id"], "m.py::C::reg_fail")

    def test_fixes_xfail_and_other_changes(self):
        # An xfail whose body now passes (an xpass: its marker stale) is a fix, as recorded.
        self.assertEqual(self._cases("fixes"), [("//pkg:t", "fix"), ("//pkg:t", "to_xpass")])
        fix = next(i for i in self.result["fixes"] if i["case"] == "m.C::to_xpass")
        self.assertEqual(fix["stale"], {"by": "marker", "other_needs_it": True})
        self.assertEqual(self._cases("other_changes"), [("//pkg:t", "skip_to_pass")])
        (changed,) = self.result["xfail_message_changes"]
        self.assertEqual(
            (changed["case"], changed["baseline_message"], changed["message"]),
            ("m.C::xfail_msg", "TypeError: x", "RuntimeError: y"),
        )

    def test_a_case_declared_for_the_candidate_only_is_a_regression_it_accepts(self):
        # Passed on the baseline, declared skip (for the candidate's release) on the candidate.
        declared, marker = [i for i in self.result["regressions"] if i.get("newly_declared")]
        self.assertEqual(
            (declared["case"], declared["newly_declared"]), ("m.C::declared_skip", DECLARED[1])
        )
        self.assertEqual(
            (marker["case"], marker["newly_declared"]),
            ("m.C::to_xfail", "xfail (a marker in the test): known"),
        )
        self.assertEqual(self.result["declared"], [])

    def test_new_and_vanished_cases(self):
        self.assertEqual(self._cases("new_cases"), [("//pkg:t", "new_bad"), ("//pkg:t", "new_ok")])
        # gone vanished from a red target: a regression above; b from a green one: coverage.
        self.assertEqual(self._cases("vanished_cases"), [("//pkg:green", "b")])

    def test_what_ran_on_one_side_only(self):
        self.assertEqual(
            sorted(
                (i["target"], i["case"] and i["case"].split("::")[1], i["reason"])
                for i in self.result["one_side"]
            ),
            [
                ("//pkg:green", "b", "vanished on the candidate"),
                ("//pkg:missing_pkg", None, "SKIPPED on one side"),
                ("//pkg:t", "new_ok", "new on the candidate"),
                ("//pkg:t", "skip_to_pass", "ran on the candidate only"),
            ],
        )
        self.assertEqual(
            self.result["coverage"], {"targets": 5, "targets_compared": 3, "cases_compared": 12}
        )

    def test_flaky_candidate_case_is_a_regression(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = Fake(pathlib.Path(tmp))
            before = fake.target("b", "//pkg:f", "PASSED", [[("x", "passed")]])
            after = fake.target("c", "//pkg:f", "FLAKY", [[("x", "failed")]])
            retry = fake.target("c2", "//pkg:f", "PASSED", [[("x", "passed")]]).attempts[0]
            after.attempts.append(bep.Attempt(1, 1, 2, "PASSED", False, 1, retry.outputs))
            result = compare.compare(
                compare.snapshot({"//pkg:f": before}), compare.snapshot({"//pkg:f": after})
            )
        (item,) = result["regressions"]
        self.assertEqual(item["flaky_attempts"], "failed 1 of 2 attempts")
        self.assertEqual(item["message"], "AssertionError: x broke")

    def test_skipped_on_one_side(self):
        self.assertEqual(
            self.result["skipped_one_side"],
            [{"target": "//pkg:missing_pkg", "baseline": "PASSED", "candidate": "SKIPPED"}],
        )

    def test_durations_need_both_thresholds(self):
        # slow: +2.5 s and +62 %; jitter: +190 % but +1.9 s; //pkg:same +3 s, +30 % (case and
        # target). Target t's +4.4 s is not compared: it is red on both sides.
        self.assertEqual(
            [(i["target"], i["case"]) for i in self.result["durations"]],
            [("//pkg:same", "m.C::a"), ("//pkg:same", None), ("//pkg:t", "m.C::slow")],
        )

    def test_nothing_changed_is_empty(self):
        same = compare.compare(self.before, self.before)
        # Nothing changed, but a case skipped (undeclared) on both sides ran on neither, the
        # cases that failed on both sides wait for their re-runs (rates.py) as broken, and an
        # xpass on both sides names its stale marker.
        self.assertEqual(
            {k: [i.get("case") for i in v] for k, v in same.items() if v and k != "coverage"},
            {
                "one_side": ["m.C::skip_to_pass"],
                "broken_both": ["m.C::fix", "m.C::still_failing"],
                "other_changes": ["m.C::to_xfail"],
            },
        )
        self.assertEqual(same["one_side"][0]["reason"], "skipped on both sides (no reason)")

    def test_report_lists_regressions_first(self):
        data = {
            "targets": "//pkg:all",
            "thresholds": {"durations": "±25 % and ≥ 2 s", "rss": "±25 % and ≥ 256 MiB"},
            "sides": {
                role: {
                    "description": role,
                    "output_base": "/ob",
                    "fingerprint": {"torch": "2.x", "cuda": None, "python": "3.11", "gpus": []},
                }
                for role in ("baseline", "candidate")
            },
            "comparison": self.result,
            "target_status": {},
            "exit_code": 1,
            "wall_s": 12.0,
        }
        for item in self.result["regressions"]:
            item["confirmation"] = {"verdict": "consistent", "failed_runs": 3, "runs": 3}
        text = report.markdown(data)
        self.assertIn("**REGRESSED (exit 1): 9 regressions; compared on both sides: 3 of 5", text)
        self.assertIn("**9 regressions** (7 not flaky, 0 flaky, 2 newly declared", text)
        self.assertLess(text.index("## Regressions"), text.index("## Fixes"))
        self.assertIn("first failure: `AssertionError: reg_fail broke`", text)
        self.assertEqual(
            json.loads(report.dump_json(data))["comparison"]["fixes"][0]["candidate"], "passed"
        )


def _pair(before: dict, after: dict) -> dict:
    """compare() of {label: (status, cases, log)} per side, written as fake testlogs."""
    with tempfile.TemporaryDirectory() as tmp:
        fake = Fake(pathlib.Path(tmp))
        snaps = [
            compare.snapshot(
                {
                    label: fake.target(side, label, status, [cases], log=log)
                    for label, (status, cases, log) in targets.items()
                }
            )
            for side, targets in (("b", before), ("c", after))
        ]
        return compare.compare(*snaps)


class CoverageTest(unittest.TestCase):
    """A case is compared only when it ran on both sides, whatever the targets' status."""

    def test_a_case_skipped_on_both_sides_in_red_targets_is_not_compared(self):
        # test_b calls pytest.skip() undeclared: the target is FAILED on both sides.
        side = ("FAILED", [("a", "passed"), ("b", "skipped")], "")
        result = _pair({"//p:skips": side}, {"//p:skips": side})
        self.assertEqual(
            [(i["case"], i["reason"]) for i in result["one_side"]],
            [("m.C::b", "skipped on both sides (no reason)")],
        )
        self.assertEqual(result["coverage"]["cases_compared"], 1)
        self.assertEqual(result["regressions"], [])

    def test_a_class_never_collected_on_both_sides_is_named(self):
        hidden = "m.py::Hidden (unittest.TestCase Hidden)"
        result = _recorded_pair(
            {"//p:hidden": ([("a", "passed")], {"never_collected": [hidden]})},
            {"//p:hidden": ([("a", "passed")], {"never_collected": [hidden]})},
        )
        (item,) = result["one_side"]
        self.assertEqual(item["reason"], f"never collected on both sides: {hidden}")

    def test_a_red_target_whose_red_no_case_explains_is_incomplete(self):
        side = ("FAILED", [("a", "passed")], "stale expectations fail this target\n")
        result = _pair({"//p:stale": side}, {"//p:stale": side})
        self.assertEqual(
            [i["reason"].split(":")[0] for i in result["one_side"]],
            [
                "FAILED on the baseline with no failing case",
                "FAILED on the candidate with no failing case",
            ],
        )

    def test_cases_of_a_side_that_reported_nothing_are_not_compared(self):
        # The baseline crashed before writing test.xml; the candidate passed.
        result = _pair(
            {"//p:crash": ("FAILED", None, "Fatal Python error: Aborted\n")},
            {"//p:crash": ("PASSED", [("a", "passed")], "")},
        )
        self.assertEqual(
            [(i["case"], i["reason"]) for i in result["one_side"]],
            [("m.C::a", "absent on the baseline: Fatal Python error: Aborted")],
        )
        self.assertEqual(result["coverage"]["cases_compared"], 0)
        # The candidate crashed; a case that failed on the baseline did not run there.
        result = _pair(
            {"//p:crash": ("FAILED", [("a", "failed")], "")},
            {"//p:crash": ("FAILED", None, "Fatal Python error: Aborted\n")},
        )
        self.assertEqual(
            [(i["case"], i["reason"]) for i in result["one_side"]],
            [("m.C::a", "absent on the candidate: Fatal Python error: Aborted")],
        )

    def test_new_and_vanished_skips_ran_nowhere(self):
        result = _pair(
            {"//p:t": ("PASSED", [("a", "passed"), ("gone", "skipped")], "")},
            {"//p:t": ("FAILED", [("a", "passed"), ("new", "skipped")], "")},
        )
        self.assertEqual(
            [(i["case"], i["reason"]) for i in result["one_side"]],
            [
                ("m.C::gone", "skipped on the baseline (no reason), absent on the candidate"),
                ("m.C::new", "new on the candidate, skipped on the candidate (no reason)"),
            ],
        )


def _recorded_pair(before: dict, after: dict, logs=("", "")) -> dict:
    """compare() of {label: (cases, record facts)} per side, each a shard with a runner record
    (Fake.recorded), the sides' logs `logs`."""
    with tempfile.TemporaryDirectory() as tmp:
        fake = Fake(pathlib.Path(tmp))
        snaps = [
            compare.snapshot(
                {
                    label: fake.recorded(side, label, cases, log, **facts)
                    for label, (cases, facts) in targets.items()
                }
            )
            for side, targets, log in (("b", before, logs[0]), ("c", after, logs[1]))
        ]
        return compare.compare(*snaps)


def _resources(rss: int) -> record.Resources:
    return record.Resources(wall_s=9.0, cpu_s=8.0, peak_rss_mib=rss, children_peak_rss_mib=7)


STACK = (
    '  File "/sandbox/1/execroot/w/bin/m.runfiles/w/tools/runner/pytest_runner.py", line 9 in run\n'
    '  File "/sandbox/1/execroot/w/bin/m.runfiles/w/m.py", line 12 in test_hangs'
)
# One shard each side: the facts the runner's record carries, for every fact the gate reads.
BASELINE = {
    "//p:t": (
        [("a", "passed"), ("b", "passed"), ("c", "passed"), ("test_hangs", "passed")],
        {"resources": _resources(1000)},
    ),
    "//p:thread": ([("a", "passed")], {}),
}
CANDIDATE = {
    "//p:t": (
        [
            ("a", "failed", 0.1, "AssertionError: a broke"),
            ("b", "never_ran", 0.0, "its test protocol never ran"),
            ("c", "xfail", 0.1, "RuntimeError: 2.15 records aten.view"),
            ("test_hangs", "failed", 0.1, "its body never returned (the process left it)"),
        ],
        {
            "resources": _resources(1400),
            "never_collected": ["m.py::Hidden (unittest.TestCase Hidden)"],
            "interrupted": "m.py::C::test_hangs",
            "interrupted_stack": STACK,
            "last_started": "m.py::C::test_hangs",
            "status": "TIMEOUT",
        },
    ),
    "//p:thread": (
        [("a", "passed")],
        {"problems": ["outside any test: an exception in thread worker: ValueError: x"]},
    ),
}
# What the runner writes for people, in today's wording and renamed: no reader may parse it.
LOGS = {
    "today": (
        "m.py .. [100%]torch_test resources: wall 9.0 s, CPU 8.0 s, peak RSS 1000 MiB\n",
        "*** SIGTERM (Bazel timeout?) while running m.py::C::test_hangs (call): stacks ***\n"
        + STACK
        + "\ntorch_test: FAILED: what the runner saw:\n  defined but never ran: m.py::C::b\n"
        "  defined but never collected by pytest: m.py::Hidden (unittest.TestCase Hidden)\n"
        "torch_test: FAILED: ...; the last test that started: m.py::C::test_hangs\n"
        "torch_test lease: GPUs [0] after 1.0 s (whole: no peak)\n"
        "torch_test gpu memory: peak_mib=5\n"
        "torch_test resources: wall 9.0 s, CPU 8.0 s, peak RSS 1400 MiB\n",
    ),
    "renamed": (
        "RSS of everything: lots\n",
        "Error: stopped somewhere; last test: elsewhere.py::nothing\n"
        "never executed: m.py::C::a\nmemory: peak_rss_mib=1\n",
    ),
}


class RecordTest(unittest.TestCase):
    """The gate reads the runner's record, never its log lines (issue 54)."""

    def test_a_renamed_runner_message_leaves_the_verdict_unchanged(self):
        def gated(wording: str) -> str:
            result = _recorded_pair(BASELINE, CANDIDATE, LOGS[wording])
            gate._newly_declared(result, "2.15.0", accept=False)
            for items in result.values():
                for item in items if isinstance(items, list) else []:
                    item.pop("log", None)  # where the fake wrote it
            return json.dumps(result, sort_keys=True)

        today = json.loads(gated("today"))
        self.assertEqual(gated("renamed"), json.dumps(today, sort_keys=True))
        # The verdict rests on every fact the record carries, none of it from the logs.
        found = {i["case"]: i for i in today["regressions"]}
        self.assertEqual(found["m.C::a"]["message"], "AssertionError: a broke")
        self.assertEqual(
            (found["m.C::b"]["candidate"], found["m.C::b"]["message"]),
            ("never_ran", "not reached: TIMEOUT while running m.py::C::test_hangs"),
        )
        self.assertIn("xfail (a marker in the test)", found["m.C::c"]["message"])
        hung = found["m.C::test_hangs"]
        self.assertEqual(hung["message"], "TIMEOUT: this test was running when it was stopped")
        self.assertEqual(hung["stack"].splitlines()[-1], '  File "w/m.py", line 12 in test_hangs')
        self.assertEqual(
            today["rss"], [{"target": "//p:t", "baseline_mib": 1000, "candidate_mib": 1400}]
        )
        self.assertEqual(
            sorted(i["reason"] for i in today["one_side"]),
            [
                "FAILED on the candidate with no failing case: outside any test: an exception "
                "in thread worker: ValueError: x",
                "never collected on the candidate: m.py::Hidden (unittest.TestCase Hidden)",
            ],
        )

    def test_the_witness_not_pytest_says_how_a_case_ended(self):
        # pytest's JUnit says passed (a conftest rewrote the report); the record says failed.
        result = _recorded_pair(
            {"//p:t": ([("a", "passed", 3.0)], {})},
            {"//p:t": ([("a", "failed", 3.0, "AssertionError: x\nmore")], {})},
        )
        (item,) = result["regressions"]
        self.assertEqual((item["candidate"], item["message"]), ("failed", "AssertionError: x"))
        self.assertEqual(result["coverage"]["cases_compared"], 1)

    def test_peak_rss(self):
        result = _recorded_pair(
            {
                "//p:t": ([("a", "passed")], {"resources": _resources(1000)}),
                "//p:same": ([("a", "passed")], {"resources": _resources(500)}),
            },
            {
                "//p:t": ([("a", "passed")], {"resources": _resources(1400)}),
                "//p:same": ([("a", "passed")], {"resources": _resources(600)}),
            },
        )
        # t: +400 MiB, +40 %; same: +100 MiB (below 256 MiB).
        self.assertEqual(
            result["rss"], [{"target": "//p:t", "baseline_mib": 1000, "candidate_mib": 1400}]
        )

    def test_a_case_that_never_ran_on_both_sides_is_not_compared(self):
        side = ([("a", "passed"), ("b", "never_ran")], {})
        result = _recorded_pair({"//p:t": side}, {"//p:t": side})
        self.assertEqual(result["regressions"], [])
        self.assertEqual(
            [(i["case"], i["reason"]) for i in result["one_side"]],
            [("m.C::b", "never ran on both sides")],
        )
        self.assertEqual(result["coverage"]["cases_compared"], 1)


class RegressionRuleTest(unittest.TestCase):
    """Passed on the baseline, not passed on the candidate: a regression whatever explains it;
    --accept-declared accepts only what a declaration or a marker explains (issue 51)."""

    def _gated(self, outcome: str, accept: bool, detail="", declared=None) -> dict:
        result = _recorded_pair(
            {"//p:t": ([("a", "passed")], {})},
            {"//p:t": ([("a", outcome, 0.1, detail, declared)], {})},
        )
        gate._newly_declared(result, "2.15.0+cu132", accept)
        return result

    def test_passed_to_xfail_is_a_regression_unless_accepted(self):
        (item,) = self._gated("xfail", False, "RuntimeError: y")["regressions"]
        self.assertEqual(
            item["message"],
            "newly declared on 2.15: xfail (a marker in the test): RuntimeError: y",
        )
        accepted = self._gated("xfail", True, "RuntimeError: y")
        self.assertEqual(accepted["regressions"], [])
        (item,) = accepted["declared"]
        self.assertIn("(accepted: --accept-declared)", item["declared"])

    def test_declared_and_not_applicable_outcomes_are_regressions_unless_accepted(self):
        for outcome, detail, declared in (
            ("declared_fail", "RuntimeError: y", "2.15 records aten.view"),
            ("declared_skip", "needs cuda", "no cuda in 2.15"),
            ("not_applicable", "not applicable to this hardware table: needs mps", None),
        ):
            with self.subTest(outcome):
                (item,) = self._gated(outcome, False, detail, declared)["regressions"]
                self.assertTrue(item["message"].startswith("newly declared on 2.15: "), item)
                self.assertEqual(self._gated(outcome, True, detail, declared)["regressions"], [])

    def test_a_skip_or_a_failure_stays_a_regression_with_accept_declared(self):
        for outcome in ("skipped", "failed", "never_ran"):
            with self.subTest(outcome):
                (item,) = self._gated(outcome, True, "why")["regressions"]
                self.assertEqual(item["candidate"], outcome)

    def test_an_xfail_marker_without_a_record_is_a_regression_too(self):
        # A saved run from before the record: pytest's JUnit says xfail.
        result = _pair(
            {"//p:t": ("PASSED", [("seq", "passed")], "")},
            {"//p:t": ("PASSED", [("seq", "xfail", 0.1, "condition on 2.15")], "")},
        )
        (item,) = result["regressions"]
        self.assertEqual(item["newly_declared"], "xfail (a marker in the test): condition on 2.15")


FAIL_215 = ("torch_test.declared", "fail: 2.15 records aten.view")


class DeclarationTest(unittest.TestCase):
    def test_declared_on_both_sides_is_covered_and_a_declared_skip_is_not_compared(self):
        side = (
            "PASSED",
            [("s", "skipped", 0.1, "", DECLARED), ("f", "xfail", 0.1, "x", FAIL_215)],
            "",
        )
        result = _pair({"//p:t": side}, {"//p:t": side})
        self.assertEqual([i["case"] for i in result["declared"]], ["m.C::f", "m.C::s"])
        self.assertEqual((result["regressions"], result["one_side"]), ([], []))
        self.assertEqual(result["coverage"]["cases_compared"], 1)  # the xfail ran on both

    def test_newly_declared_fail_is_a_regression_it_accepts(self):
        result = _pair(
            {"//p:t": ("PASSED", [("seq", "passed")], "")},
            {"//p:t": ("PASSED", [("seq", "xfail", 0.1, "declared", FAIL_215)], "")},
        )
        (item,) = result["regressions"]
        self.assertEqual(item["newly_declared"], FAIL_215[1])
        self.assertEqual(result["declared"], [])

    def test_the_gate_names_the_release_and_accepts_only_when_asked(self):
        def gated(accept: bool) -> dict:
            result = _pair(
                {"//p:t": ("PASSED", [("seq", "passed")], "")},
                {"//p:t": ("PASSED", [("seq", "xfail", 0.1, "declared", FAIL_215)], "")},
            )
            gate._newly_declared(result, "2.15.0+cu132", accept)
            return result

        (item,) = gated(False)["regressions"]
        self.assertEqual(item["message"], f"newly declared on 2.15: {FAIL_215[1]}")
        accepted = gated(True)
        self.assertEqual(accepted["regressions"], [])
        self.assertIn("(accepted: --accept-declared)", accepted["declared"][0]["declared"])

    def test_an_outcome_that_does_not_match_its_declaration_is_a_regression(self):
        # b failed on the baseline and passes against its declared fail: a fix (FixTest).
        result = _pair(
            {"//p:t": ("PASSED", [("a", "passed"), ("b", "failed")], "")},
            {
                "//p:t": (
                    "FAILED",
                    [("a", "failed", 0.1, "", DECLARED), ("b", "passed", 0.1, "", FAIL_215)],
                    "",
                )
            },
        )
        self.assertEqual(result["declared"], [])
        self.assertEqual(
            [(i["case"], i["message"]) for i in result["regressions"]],
            [("m.C::a", "declared skip: needs cuda, but it failed: AssertionError: a broke")],
        )
        (fix,) = result["fixes"]
        self.assertEqual((fix["case"], fix["candidate"]), ("m.C::b", "passed (stale expectation)"))


EXPECTATIONS = "pkg/m.expectations.toml"


def _stale(entry=1, torch=None, test="m.py::C::a") -> dict:
    """The record's stale declaration: [[expect]] #entry, outcome fail."""
    return {"by": "expectations", "entry": entry, "test": test, "outcome": "fail", "torch": torch}


class FixTest(unittest.TestCase):
    """A case failing or declared failing on the baseline whose body passes on the candidate is
    FIXED, its stale expectation named with the edit that removes it (issue 64)."""

    def _gated(self, baseline: tuple, candidate: tuple) -> dict:
        result = _recorded_pair(
            {"//p:t": ([baseline, ("ok", "passed")], {"expectations": EXPECTATIONS})},
            {"//p:t": ([candidate, ("ok", "passed")], {"expectations": EXPECTATIONS})},
        )
        gate._newly_declared(result, "2.15.0", accept=False)
        gate._stale_edits(result, "2.13.0+cpu", "2.15.0")
        return result

    def test_a_declared_fail_whose_body_now_passes_is_a_fix_with_its_edit(self):
        why = "declared fail (off by one), but it passed"  # the runner's words: not read
        result = self._gated(
            ("a", "declared_fail", 0.1, "AssertionError: off by one", "off by one"),
            ("a", "failed", 0.1, why, None, _stale()),
        )
        self.assertEqual(result["regressions"], [])
        (fix,) = result["fixes"]
        self.assertEqual(
            (fix["case"], fix["baseline"], fix["candidate"]),
            ("m.C::a", "declared_fail", "passed (stale expectation)"),
        )
        self.assertEqual(fix["stale"]["file"], EXPECTATIONS)
        # The entry declares every release: the baseline's still fails, so it keeps it.
        self.assertEqual(
            fix["stale"]["edit"],
            f"in {EXPECTATIONS}, [[expect]] #1 (test = 'm.py::C::a'): add torch = ['2.13'] "
            "(still needed on 2.13 only)",
        )
        self.assertEqual(gate.exit_code(result), 0)
        self.assertEqual(result["coverage"]["cases_compared"], 2)

    def test_a_failure_that_passes_against_a_declaration_for_the_candidate_only(self):
        result = self._gated(
            ("a", "failed", 0.1, "AssertionError: off by one"),
            ("a", "failed", 0.1, "stale", None, _stale(entry=4, torch=["2.15"])),
        )
        (fix,) = result["fixes"]
        self.assertEqual(
            fix["stale"]["edit"],
            f"in {EXPECTATIONS}, delete [[expect]] #4 (test = 'm.py::C::a') "
            "(its torch = ['2.15'] names only 2.15)",
        )
        self.assertEqual(gate.exit_code(result), 0)

    def test_an_xfail_whose_body_now_passes_is_a_fix_naming_the_marker(self):
        result = self._gated(
            ("a", "xfail", 0.1, "AssertionError: known"),
            ("a", "failed", 0.1, "expected to fail, but it passed", None, {"by": "marker"}),
        )
        self.assertEqual(result["regressions"], [])
        (fix,) = result["fixes"]
        self.assertEqual(
            fix["stale"]["edit"],
            "make the test's xfail marker (or expectedFailure) condition leave torch 2.15 out",
        )

    def test_a_pass_on_both_sides_against_a_stale_candidate_declaration_is_no_regression(self):
        # The candidate's target is red for the stale entry alone: no regression, no target one.
        result = self._gated(
            ("a", "passed"), ("a", "failed", 0.1, "stale", None, _stale(torch=["2.14", "2.15"]))
        )
        self.assertEqual((result["regressions"], result["one_side"]), ([], []))
        (item,) = result["other_changes"]
        self.assertEqual(
            item["stale"]["edit"],
            f"in {EXPECTATIONS}, [[expect]] #1 (test = 'm.py::C::a'): remove '2.15' from "
            "torch = ['2.14', '2.15']",
        )
        self.assertEqual(gate.exit_code(result), 0)

    def test_a_body_that_fails_after_passing_against_a_stale_baseline_entry_regressed(self):
        result = self._gated(
            ("a", "failed", 0.1, "stale", None, _stale()),
            ("a", "failed", 0.1, "AssertionError: broke"),
        )
        (item,) = result["regressions"]
        self.assertEqual(
            (item["baseline"], item["candidate"]), ("passed (stale expectation)", "failed")
        )

    def test_a_declared_skip_on_the_baseline_that_runs_and_passes_on_the_candidate(self):
        stale = dict(_stale(entry=2), outcome="skip")
        result = self._gated(
            ("a", "declared_skip", 0.1, "requires cuda", "needs a GPU"),
            ("a", "failed", 0.1, "declared skip (needs a GPU), but it passed", None, stale),
        )
        self.assertEqual(result["regressions"], [])
        (item,) = result["other_changes"]
        self.assertEqual(
            item["stale"]["edit"],
            f"in {EXPECTATIONS}, [[expect]] #2 (test = 'm.py::C::a'): add torch = ['2.13'] "
            "(still needed on 2.13 only)",
        )
        # It ran on the candidate only: not compared, the verdict incomplete.
        self.assertEqual([i["reason"] for i in result["one_side"]], ["ran on the candidate only"])

    def test_a_rerun_that_passes_against_a_stale_expectation_is_a_pass(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = Fake(pathlib.Path(tmp))
            target = fake.recorded("r", "//p:t", [("a", "failed", 0.1, "AssertionError: x")])
            rerun = fake.recorded("r2", "//p:t", [("a", "failed", 0.1, "stale", None, _stale())])
            target.attempts.append(dataclasses.replace(rerun.attempts[0], run=2))
            verdict = gate._verdict(target, None, {"case": "m.C::a", "node_id": "m.py::C::a"})
        self.assertEqual(verdict["failed_runs"], 2)  # the gate's own run, and run 1

    def test_the_report_names_the_fix_and_its_edit(self):
        result = self._gated(
            ("a", "declared_fail", 0.1, "AssertionError: off by one", "off by one"),
            ("a", "failed", 0.1, "stale", None, _stale()),
        )
        text = report.markdown(_report_data(result, gate.exit_code(result)))
        self.assertIn("**complete, no regressions (exit 0)", text)
        self.assertIn(
            "- `//p:t` `m.C::a`: declared_fail → passed (stale expectation); stale declared fail: "
            f"in {EXPECTATIONS}, [[expect]] #1",
            text,
        )


def _report_data(result: dict, code: int, cuda=(None, None)) -> dict:
    """What report.markdown reads, around a comparison."""
    return {
        "targets": "//p:t",
        "thresholds": {"durations": "±25 % and ≥ 2 s", "rss": "±25 % and ≥ 256 MiB"},
        "sides": {
            role: {
                "description": role,
                "output_base": "/ob",
                "fingerprint": {"torch": "2.x", "cuda": c, "python": "3.11", "gpus": []},
            }
            for role, c in zip(("baseline", "candidate"), cuda, strict=True)
        },
        "comparison": result,
        "target_status": {},
        "exit_code": code,
        "wall_s": 1.0,
    }


NO_DRIVER = (
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA "
    "GPU and installed a driver from http://www.nvidia.com/Download/index.aspx"
)
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has ..."
CPU_BUILD, CUDA_BUILD = {"cuda": None, "gpus": []}, {"cuda": "13.0", "gpus": []}


class InfraTest(unittest.TestCase):
    """What the host or a side's build caused is INFRA: its own section, never a regression and
    never green (issue 64, tools/gate/infra.py)."""

    def _gated(self, baseline: list, candidate: list, differ=None, facts=({}, {})) -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            fake = Fake(pathlib.Path(tmp))
            snaps = [
                compare.snapshot({"//p:t": fake.recorded(side, "//p:t", cases, **f)})
                for side, cases, f in (("b", baseline, facts[0]), ("c", candidate, facts[1]))
            ]
        return compare.compare(*snaps, differ=differ)

    def test_a_cuda_candidate_on_a_cpu_host_finding_no_driver_is_infra(self):
        differ = infra.difference(CPU_BUILD, CUDA_BUILD)
        self.assertEqual(differ, "baseline torch is a CPU build, candidate a CUDA 13.0 build")
        result = self._gated(
            [("a", "passed"), ("b", "passed")],
            [("a", "failed", 0.1, NO_DRIVER), ("b", "passed")],
            differ,
        )
        self.assertEqual(result["regressions"], [])
        (item,) = result["infra"]
        self.assertEqual(
            (item["case"], item["side"], item["cause"], item["evidence"]),
            ("m.C::a", "candidate", "no_nvidia_driver", NO_DRIVER),
        )
        self.assertEqual(item["rule"], f"the sides differ: {differ}")
        self.assertEqual(result["coverage"]["cases_compared"], 1)  # b only
        self.assertEqual(gate.exit_code(result), gate.EXIT_INCOMPLETE)
        text = report.markdown(_report_data(result, gate.exit_code(result), (None, "13.0")))
        self.assertIn("1 not compared for infrastructure", text)
        self.assertIn(
            "- `//p:t` (1 case: `m.C::a`): no_nvidia_driver on the candidate, a CUDA build of "
            "torch on a host without an NVIDIA driver; the sides differ: ",
            text,
        )

    def test_the_same_evidence_on_the_candidate_only_on_the_same_hardware_stays_a_regression(self):
        result = self._gated([("a", "passed")], [("a", "failed", 0.1, OOM)])
        (item,) = result["regressions"]
        self.assertEqual(result["infra"], [])
        self.assertEqual(item["infra_suspect"]["cause"], "cuda_out_of_memory")
        self.assertIn("on the candidate only, on the same hardware", item["infra_suspect"]["rule"])
        self.assertEqual(gate.exit_code(result), gate.EXIT_REGRESSION)

    def test_infra_evidence_on_both_sides_is_never_green(self):
        # Failed the same on both sides: no outcome changed, yet the case was never compared.
        result = self._gated([("a", "failed", 0.1, OOM)], [("a", "failed", 0.1, OOM)])
        (item,) = result["infra"]
        self.assertEqual((item["side"], item["cause"]), ("both", "cuda_out_of_memory"))
        self.assertEqual(gate.exit_code(result), gate.EXIT_INCOMPLETE)

    def test_a_candidate_whose_gpu_lease_was_refused_is_infra_not_a_regression(self):
        refused = "cannot run on this host: variant 'multi_gpu' needs 2 GPUs, found 0"
        result = self._gated(
            [("a", "passed"), ("b", "passed")],
            [],
            facts=({}, {"infrastructure": refused, "problems": [f"GPU lease failed: {refused}"]}),
        )
        self.assertEqual(result["regressions"], [])
        self.assertEqual(
            [(i["case"], i["cause"], i["evidence"]) for i in result["infra"]],
            [("m.C::a", "gpu_lease_refused", refused), ("m.C::b", "gpu_lease_refused", refused)],
        )
        self.assertEqual(result["one_side"], [])
        self.assertEqual(gate.exit_code(result), gate.EXIT_INCOMPLETE)

    def test_a_test_action_remote_execution_lost_is_infra(self):
        # Bazel's error as tools/remote/README.md shows it for a pool whose worker died.
        stderr = (
            "ERROR: /w/rigtest/BUILD.bazel:27:12: Testing //p:t failed: (Exit 34): Remote "
            "Execution Failure:\nFailed Precondition: no live worker in pool 'gpu-h200-x1' for "
            "10 s: its workers are dead or missing\n"
        )
        events = [
            {"id": {"targetConfigured": {"label": "//p:t"}}, "configured": {"testSize": "SMALL"}},
            {"id": {"progress": {"opaqueCount": 1}}, "progress": {"stderr": stderr}},
            {
                "id": {"targetCompleted": {"label": "//p:t"}},
                "children": [{"testSummary": {"label": "//p:t"}}],
                "completed": {},
            },
        ]
        lost = bep.parse(json.dumps(e) for e in events)["//p:t"]
        self.assertEqual(
            lost.bazel_error,
            "(Exit 34): Remote Execution Failure: Failed Precondition: no live worker in pool "
            "'gpu-h200-x1' for 10 s: its workers are dead or missing",
        )
        with tempfile.TemporaryDirectory() as tmp:
            fake = Fake(pathlib.Path(tmp))
            before = compare.snapshot({"//p:t": fake.recorded("b", "//p:t", [("a", "passed")])})
        result = compare.compare(before, compare.snapshot({"//p:t": lost}))
        self.assertEqual(result["regressions"], [])
        (item,) = result["infra"]
        self.assertEqual((item["case"], item["cause"]), ("m.C::a", "remote_execution_failure"))
        self.assertEqual(gate.exit_code(result), gate.EXIT_INCOMPLETE)

    def test_only_the_exact_texts_are_infra(self):
        for text in (
            "AssertionError: 'Found no NVIDIA driver on your system.' != ''",  # a test's own
            "RuntimeError: CUDA error: out of memory",  # not the allocator's message
            "torch.OutOfMemoryError: CUDA out of memory",  # no allocation named
            "RuntimeError: Found no NVIDIA drivers",
            "RuntimeError: No CUDA GPUs are available on rank 1",
            "torch.distributed.DistStoreError: Timed out after 30 seconds waiting for the key",
        ):
            self.assertIsNone(infra.case_cause(text), text)
        self.assertEqual(
            infra.case_cause("RuntimeError: No CUDA GPUs are available").name, "no_visible_gpu"
        )
        self.assertEqual(
            infra.case_cause(
                "torch.distributed.DistStoreError: Timed out after 301 seconds waiting for "
                "clients. 1/2 clients joined."
            ).name,
            "nccl_rendezvous_timeout",
        )
        self.assertEqual(infra.difference(CUDA_BUILD, dict(CUDA_BUILD, cuda="12.8")), None)
        self.assertIn(
            "GPUs differ",
            infra.difference(dict(CUDA_BUILD, gpus=["H200"]), dict(CUDA_BUILD, gpus=["H100"])),
        )


class VerdictTest(unittest.TestCase):
    def test_consistent_flaky_and_not_confirmed(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = Fake(pathlib.Path(tmp))
            target = fake.target("r", "//pkg:t", "FAILED", [[("x", "failed"), ("y", "passed")]])
            run2 = fake.target("r2", "//pkg:t", "FAILED", [[("x", "failed"), ("y", "failed")]])
            target.attempts.append(
                bep.Attempt(1, 2, 1, "FAILED", False, 1, run2.attempts[0].outputs)
            )
            verdict = gate._verdict(target, None, {"case": "m.C::x"})
            self.assertEqual(verdict["verdict"], "consistent")
            self.assertEqual(
                gate._verdict(target, None, {"case": "m.C::y"}),
                {"verdict": "flaky", "failed_runs": 2, "runs": 3},
            )
            # A case the re-runs did not run (a selection that missed it) proves nothing.
            self.assertEqual(
                gate._verdict(target, None, {"case": "m.C::z"})["verdict"],
                "not confirmed (the case ran in 0 of 2 re-runs)",
            )

    def test_a_rerun_that_runs_nothing_is_not_confirmed(self):
        target = bep.Target("//pkg:t", status="NO STATUS")
        self.assertEqual(
            gate._verdict(target, None, {"case": None})["verdict"],
            "not confirmed (the re-runs produced no result)",
        )


C = rates.Count


class RatesDecisionTest(unittest.TestCase):
    """The decision on failure rates alone (tools/gate/rates.py): Fisher's exact one-sided test
    at alpha = 1 - confidence, each side's rate with its Wilson interval (issue 64)."""

    def test_fisher_one_sided_on_the_two_by_two_table(self):
        # 0 of 5 against 5 of 5: the one table of 5 failures that extreme, 1 / C(10, 5).
        more, less = rates.fisher(C(0, 5), C(5, 5))
        self.assertAlmostEqual(more, 1 / 252)
        self.assertAlmostEqual(less, 1.0)
        # 1 of 5 against 5 of 5: (C(5,5) C(5,1)) / C(10,6) = 5 / 210.
        self.assertAlmostEqual(rates.fisher(C(1, 5), C(5, 5))[0], 5 / 210)
        self.assertAlmostEqual(rates.fisher(C(5, 5), C(0, 5))[1], 1 / 252)

    def test_a_consistent_regression_needs_five_runs_a_side_at_099(self):
        self.assertEqual(rates.first_round(0.99), 5)
        self.assertEqual(rates.decide(C(0, 5), C(5, 5))["verdict"], rates.REGRESSED)
        self.assertEqual(rates.decide(C(5, 5), C(0, 5))["verdict"], rates.FIXED)
        # At 4 a side, p = 1/70 > 0.01: still undecided, run on to the budget.
        pending = rates.decide(C(0, 4), C(4, 4))
        self.assertIsNone(pending["verdict"])
        self.assertEqual(pending["runs"], {"baseline": 5, "candidate": 5})
        # One run each (the gate's own): both sides to 5 at once.
        self.assertEqual(rates.decide(C(0, 1), C(1, 1))["runs"], {"baseline": 5, "candidate": 5})

    def test_out_of_budget_broken_flaky_or_not_decided(self):
        self.assertEqual(rates.decide(C(5, 5), C(5, 5))["verdict"], rates.BROKEN_BOTH)
        self.assertEqual(rates.decide(C(2, 5), C(1, 5))["verdict"], rates.FLAKY_BOTH)
        self.assertEqual(rates.decide(C(1, 5), C(1, 5))["verdict"], rates.FLAKY_BOTH)
        # A baseline that failed its first run by chance does not hide a candidate that broke:
        # 1 of 5 against 5 of 5 is not significant at 0.99, and not green either.
        undecided = rates.decide(C(1, 5), C(5, 5))
        self.assertEqual(undecided["verdict"], rates.NOT_DECIDED)
        self.assertIn("about 6 runs per side (1 more on the baseline, 1 more", undecided["settle"])
        self.assertIsNone(rates.runs_to_settle(C(1, 5), C(1, 5)))

    def test_wilson_interval(self):
        low, high = rates.wilson(C(0, 5), 0.99)
        z2 = statistics.NormalDist().inv_cdf(0.995) ** 2
        self.assertEqual(low, 0.0)
        self.assertAlmostEqual(high, (z2 / 5) / (1 + z2 / 5))
        low, high = rates.wilson(C(5, 5), 0.99)
        self.assertAlmostEqual(low, 1 - (z2 / 5) / (1 + z2 / 5))
        self.assertEqual(high, 1.0)

    def test_a_side_that_cannot_be_re_run_keeps_its_one_run_and_is_never_green(self):
        saved = {"baseline": "a saved run"}
        # The candidate runs its budget; the saved baseline's one run stands.
        self.assertEqual(
            rates.decide(C(0, 1), C(1, 1), fixed=saved)["runs"], {"baseline": 1, "candidate": 5}
        )
        broke = rates.decide(C(0, 1), C(5, 5), fixed=saved)
        self.assertEqual(broke["verdict"], rates.REGRESSED)
        self.assertIn("baseline not re-runnable (a saved run)", broke["note"])
        self.assertIn("not at the stated confidence", rates.line(broke))
        flaky = rates.decide(C(0, 1), C(2, 5), fixed=saved)
        self.assertEqual(flaky["verdict"], rates.NOT_DECIDED)
        self.assertEqual(flaky["settle"], "runs of the baseline's (a saved run) live")
        # Two saved runs (a pool gate): one run each, passed -> failed is still red.
        both = {"baseline": "a saved run", "candidate": "a saved run"}
        self.assertEqual(rates.decide(C(0, 1), C(1, 1), fixed=both)["verdict"], rates.REGRESSED)

    def test_rounds_re_run_only_the_undecided_on_both_sides(self):
        asked = []
        truth = {"broke": (0.0, 1.0), "same": (1.0, 1.0)}  # failure rate per side

        def rerun(side, asks):
            asked.append((side, dict(asks)))
            i = rates.SIDES.index(side)
            return {k: (int(truth[k][i]) * n, n) for k, n in asks.items()}

        first = {
            "broke": {"baseline": C(0, 1), "candidate": C(1, 1)},
            "same": {"baseline": C(1, 1), "candidate": C(1, 1)},
        }
        decided = rates.settle(first, rerun)
        self.assertEqual(decided["broke"]["verdict"], rates.REGRESSED)
        self.assertEqual(decided["same"]["verdict"], rates.BROKEN_BOTH)
        # One round: each side once, 4 more runs of each case.
        self.assertEqual(
            asked,
            [("baseline", {"broke": 4, "same": 4}), ("candidate", {"broke": 4, "same": 4})],
        )
        self.assertEqual(decided["broke"]["reruns"], {"baseline": 4, "candidate": 4})

    def test_a_case_that_does_not_run_again_stops_being_asked(self):
        calls = []

        def rerun(side, asks):
            calls.append(side)
            return {}  # the selection ran nothing

        decided = rates.settle({"x": {"baseline": C(0, 1), "candidate": C(1, 1)}}, rerun)
        self.assertEqual(calls, ["baseline", "candidate"])
        # Its one run each stands, as a saved run's: passed -> failed stays red, and says why.
        self.assertEqual(decided["x"]["verdict"], rates.REGRESSED)
        self.assertIn("the case did not run again there", decided["x"]["note"])
        self.assertEqual(decided["x"]["reruns"], {"baseline": 0, "candidate": 0})


class RatesGateTest(unittest.TestCase):
    """The gate's re-runs on both sides (Gate.rate) over fake test.xml, their verdicts' lists,
    the exit code and the report."""

    def _gate(self, first: dict, reruns: dict, saved=()):
        """first: {case: (baseline outcome, candidate outcome)}; reruns: {side: {case: [outcome
        of each re-run]}}. Returns (comparison after the re-runs, Bazel calls)."""
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        fake, label = Fake(pathlib.Path(tmp.name)), "//p:t"
        snaps = []
        for i, side in enumerate(("b", "c")):
            cases = [(c, o[i]) for c, o in first.items()]
            status = "PASSED" if all(o == "passed" for _, o in cases) else "FAILED"
            snaps.append(compare.snapshot({label: fake.target(side, label, status, [cases])}))
        result = compare.compare(*snaps)
        calls = []

        def run(side, targets, name, extra):
            calls.append((side.role, targets, name, extra))
            runs = int(next(x for x in extra if x.startswith("--runs_per_test=")).split("=")[1])
            target = bep.Target(label, status="FAILED", run_count=runs)
            for n in range(1, runs + 1):
                done = len([c for c in calls if c[0] == side.role]) * 100 + n
                cases = [(c, o.pop(0)) for c, o in reruns[side.role].items() if o]
                one = fake.target(f"{side.role}{done}", label, "FAILED", [cases])
                target.attempts.append(dataclasses.replace(one.attempts[0], run=n))
            return {"targets": {label: target}}

        args = argparse.Namespace(
            output_root=tmp.name, out=tmp.name, confidence=0.99, max_runs=5, bazel_arg=[]
        )
        g = gate.Gate(args)
        g.run = run
        by_role = {
            role: types.SimpleNamespace(role=role, kind="results" if role in saved else "python")
            for role in ("baseline", "candidate")
        }
        g.rate(by_role, result)
        return result, calls

    def _where(self, result) -> dict:
        return {
            key: sorted(i["case"].split("::")[1] for i in result[key])
            for key in ("regressions", "fixes", "flaky_both", "broken_both", "not_decided")
            if result[key]
        }

    def test_verdicts_from_re_runs_on_both_sides(self):
        result, calls = self._gate(
            {
                "broke": ("passed", "failed"),
                "flake": ("passed", "failed"),
                "fix": ("failed", "passed"),
                "hidden": ("failed", "failed"),  # failed on the baseline by chance
                "dead": ("failed", "failed"),
                "ok": ("passed", "passed"),
            },
            {
                "baseline": {
                    "broke": ["passed"] * 4,
                    "flake": ["passed", "failed", "passed", "passed"],
                    "fix": ["failed"] * 4,
                    "hidden": ["passed"] * 4,
                    "dead": ["failed"] * 4,
                },
                "candidate": {
                    "broke": ["failed"] * 4,
                    "flake": ["passed"] * 4,
                    "fix": ["passed"] * 4,
                    "hidden": ["failed"] * 4,
                    "dead": ["failed"] * 4,
                },
            },
        )
        self.assertEqual(
            self._where(result),
            {
                "regressions": ["broke"],
                "fixes": ["fix"],
                "flaky_both": ["flake"],
                "broken_both": ["dead"],
                "not_decided": ["hidden"],
            },
        )
        # One Bazel invocation per side, the undecided cases by node id, 4 runs each.
        self.assertEqual(
            [(c[0], c[1]) for c in calls], [("baseline", ["//p:t"]), ("candidate", ["//p:t"])]
        )
        ids = json.dumps(
            sorted(f"m.py::C::{c}" for c in ("broke", "dead", "fix", "flake", "hidden"))
        )
        self.assertEqual(
            calls[0][3],
            [
                "--runs_per_test=4",
                "--nocache_test_results",
                f"--test_env=TORCH_TEST_NODE_IDS={ids}",
            ],
        )
        (broke,) = result["regressions"]
        self.assertEqual(
            broke["confirmation"], {"verdict": "consistent", "failed_runs": 5, "runs": 5}
        )
        self.assertEqual(broke["rates"]["reruns"], {"baseline": 4, "candidate": 4})
        self.assertEqual(gate.exit_code(result), gate.EXIT_REGRESSION)
        result["regressions"] = []
        self.assertEqual(gate.exit_code(result), gate.EXIT_INCOMPLETE)  # not decided
        result["not_decided"] = []
        self.assertEqual(gate.exit_code(result), 0)  # flaky and broken on both: no regression

    def test_a_flake_on_both_sides_is_not_red(self):
        result, _ = self._gate(
            {"flake": ("passed", "failed")},
            {
                "baseline": {"flake": ["passed", "passed", "failed", "passed"]},
                "candidate": {"flake": ["passed"] * 4},
            },
        )
        self.assertEqual(self._where(result), {"flaky_both": ["flake"]})
        self.assertEqual(gate.exit_code(result), 0)

    def test_a_saved_baseline_is_not_re_run_and_its_one_run_stands(self):
        result, calls = self._gate(
            {"broke": ("passed", "failed"), "flaky": ("passed", "failed")},
            {
                "baseline": {},
                "candidate": {"broke": ["failed"] * 4, "flaky": ["passed", "failed"] * 2},
            },
            saved=("baseline",),
        )
        self.assertEqual([c[0] for c in calls], ["candidate"])
        self.assertEqual(self._where(result), {"not_decided": ["flaky"], "regressions": ["broke"]})
        self.assertIn(
            "baseline not re-runnable (a saved run)", result["regressions"][0]["rates"]["note"]
        )

    def test_the_reports_state_rates_intervals_and_runs(self):
        result, _ = self._gate(
            {"broke": ("passed", "failed"), "hidden": ("failed", "failed")},
            {
                "baseline": {"broke": ["passed"] * 4, "hidden": ["passed"] * 4},
                "candidate": {"broke": ["failed"] * 4, "hidden": ["failed"] * 4},
            },
        )
        data = _report_data(result, gate.exit_code(result))
        text = report.markdown(data)
        self.assertIn(
            "   - rates: regressed: baseline failed 0 of 5 (0 %, 99 % Wilson score interval "
            "0 %–57 %); candidate failed 5 of 5 (100 %, 99 % Wilson score interval 43 %–100 %); "
            "Fisher's exact one-sided p = 0.00397 (alpha 0.01); re-runs: 4 on the baseline, 4 on "
            "the candidate",
            text,
        )
        self.assertIn("## Not decided within the re-run budget (exit 4)", text)
        self.assertIn("1 not decided within the re-run budget", text)
        page = report_html.page(json.loads(report.dump_json(data)), suffixes={"cpu": ""})
        self.assertIn("candidate failed 5 of 5 (100 %, 99 % Wilson score interval", page)
        self.assertIn('id="not-decided"', page)


class RepeatTest(unittest.TestCase):
    """--repeat N: each side's own runs, N + 1 of every target, counted per case and decided on
    rates as the re-runs are (tools/gate/rates.py), not "any failure in a repeat is red"."""

    def _first_runs(self, runs: dict) -> dict:
        """The comparison of first runs {side: [[(case, outcome), ...] per run]}."""
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        fake, label, snaps = Fake(pathlib.Path(tmp.name)), "//p:t", []
        for side, side_runs in runs.items():
            target = bep.Target(label, status="FAILED", run_count=len(side_runs))
            for n, cases in enumerate(side_runs, 1):
                one = fake.target(f"{side}{n}", label, "FAILED", [cases])
                target.attempts.append(dataclasses.replace(one.attempts[0], run=n))
            snaps.append(compare.snapshot({label: target}))
        return compare.compare(*snaps)

    def test_every_run_of_a_repeat_counts_on_each_side(self):
        flake = [[("flake", "passed")]] * 3 + [[("flake", "failed")]]
        (item,) = self._first_runs({"b": flake, "c": flake[::-1]})["broken_both"] or [None]
        self.assertEqual(item["first_run"], {"baseline": [1, 4], "candidate": [1, 4]})

    def test_a_flake_of_both_sides_in_the_repeats_is_no_regression(self):
        # Failing 1 of 4 runs on each side: flaky on both, decided on rates within the budget.
        flake = [[("flake", "passed")]] * 3 + [[("flake", "failed")]]
        result = self._first_runs({"b": flake, "c": flake[::-1]})
        g = gate.Gate(argparse.Namespace(output_root="/x", out="/x", confidence=0.99, max_runs=4))
        g.run = lambda *a: self.fail("re-ran cases whose 4 runs per side were already counted")
        by_role = {r: types.SimpleNamespace(role=r, kind="python") for r in gate.rates.SIDES}
        g.rate(by_role, result)
        (item,) = result["flaky_both"]
        self.assertEqual(item["rates"]["candidate"]["runs"], 4)
        self.assertEqual(gate.exit_code(result), 0)

    def test_repeat_runs_both_sides_n_more_times_in_their_own_runs(self):
        self.assertEqual(gate.first_runs(2), ["--runs_per_test=3", "--nocache_test_results"])
        self.assertEqual(gate.first_runs(0), [])


class BadInputTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = pathlib.Path(tmp.name)

    def _gate_error(self, candidate: str) -> str:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = gate.main(["--candidate", candidate, "--out", str(self.tmp / "out")])
        self.assertEqual(code, gate.EXIT_BAD_INPUT)
        lines = err.getvalue().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertFalse((self.tmp / "out").exists(), "nothing runs before the input is checked")
        return lines[0]

    def test_missing_interpreter(self):
        self.assertEqual(
            self._gate_error(f"python:{self.tmp}/nope/python3"),
            f"gate: candidate interpreter {self.tmp}/nope/python3 does not exist or is not "
            "executable",
        )

    def test_interpreter_without_torch(self):
        python = self.tmp / "python3"
        # -S: no site-packages, so no torch whatever this interpreter has installed.
        python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
        python.chmod(0o755)
        self.assertEqual(
            self._gate_error(str(python)), f"gate: candidate interpreter {python} has no torch"
        )

    def test_lock_that_does_not_exist_or_does_not_parse_or_lacks_torch(self):
        missing = self.tmp / "missing.lock"
        self.assertEqual(
            self._gate_error(f"lock:{missing}"), f"gate: candidate lock {missing} does not exist"
        )
        loose = self.tmp / "loose.lock"
        loose.write_text("torch>=2.14\n")
        self.assertEqual(
            self._gate_error(f"lock:{loose}"),
            f"gate: candidate lock {loose} does not resolve: "
            "not an exact pin with --hash=sha256: 'torch>=2.14'",
        )
        no_torch = self.tmp / "no_torch.lock"
        no_torch.write_text("# a lock\nsix==1.16.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
        self.assertEqual(
            self._gate_error(str(no_torch)), f"gate: candidate lock {no_torch} has no torch"
        )

    def test_lock_that_does_not_resolve_names_pips_reason(self):
        # Recorded from `tools/bazel fetch @pypi//:torch` with TORCH_TEST_LOCK pinning torch==9.9.9.
        log = (
            pathlib.Path(__file__).parent / "testdata" / "fetch_unresolvable_lock.log"
        ).read_text()
        self.assertEqual(
            gate.fetch_error(log),
            "Cannot install torch==9.9.9 because these package versions have conflicting "
            "dependencies.",
        )

    def test_sides_get_their_own_mode_and_output_base(self):
        env = {"TORCH_TEST_PYTHON": "/usr/bin/python3", "PATH": os.environ.get("PATH", "")}
        pinned = sides.parse("baseline", "pinned")
        # "pinned", not unset: a checkout set to host mode (tools/bazel setup) stays out of it.
        self.assertEqual(pinned.env(env)["TORCH_TEST_PYTHON"], "pinned")
        lock = sides.parse("candidate", f"lock:{self.tmp}/x.lock")
        self.assertEqual(lock.env(env)["TORCH_TEST_LOCK"], str(self.tmp / "x.lock"))
        self.assertEqual(lock.env(env)["TORCH_TEST_PYTHON"], "pinned")
        # Lock sides run their CPU variants on a GPU host instead of stopping there.
        self.assertEqual(pinned.env(env)["TORCH_TEST_CPU_ONLY"], "1")
        self.assertEqual(lock.env(env)["TORCH_TEST_CPU_ONLY"], "1")
        self.assertNotIn(
            "TORCH_TEST_CPU_ONLY", sides.parse("candidate", "/usr/bin/python3").env(env)
        )
        self.assertNotEqual(lock.key, sides.parse("candidate", f"lock:{self.tmp}/y.lock").key)

    def test_report_directory_defaults_under_the_gate_cache(self):
        # The README's commands pass no --out; the report then goes under the gate's root.
        args = argparse.Namespace(out=None, output_root=str(self.tmp))
        self.assertEqual(gate.Gate(args).out.parent, self.tmp / "reports")


class PackagesTest(unittest.TestCase):
    def test_a_package_the_lock_supplied_is_named_as_the_lock_s(self):
        # A candidate interpreter without pytest ran on the lock's pytest 9.2.0 (host mode
        # installs locked pure-Python packages into @pypi; its manifest lists what tests got).
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            python = tmp / "python3"
            python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')  # no site-packages
            python.chmod(0o755)
            manifest = tmp / "ob" / "external" / "pypi" / "manifest.json"
            manifest.parent.mkdir(parents=True)
            manifest.write_text(
                json.dumps({"mode": "host", "packages": {"pytest": "9.2.0"}, "missing": []})
            )
            candidate_side = sides.parse("candidate", f"python:{python}")
            got = sides.packages(candidate_side, tmp / "ob")
        self.assertEqual(got["pytest"], sides.SUPPLIED.format(version="9.2.0"))
        (row,) = sides.package_changes({"pytest": "9.2.0"}, {"pytest": got["pytest"]})
        self.assertEqual(
            (row["baseline"], row["candidate"]),
            ("9.2.0", "9.2.0 (the lock's, supplied by @pypi: the interpreter has none)"),
        )


RESULTS_TESTDATA = pathlib.Path(__file__).resolve().parents[1] / "results" / "testdata"


class SavedRunTest(unittest.TestCase):
    """Pool gating: two saved runs (save_run) compared case by case, nothing re-run."""

    def _save(self, tmp: pathlib.Path, name: str, outcome: str, tags=("", "")) -> pathlib.Path:
        # A recorded build event file (tools/results/testdata), its testlogs written here.
        testlogs = tmp / name / "testlogs"
        events = tmp / name / "events.json"
        text = (RESULTS_TESTDATA / "sharded_fresh.json").read_text().replace(*tags)
        for uri in set(re.findall(r"file:///TESTLOGS/([^\"]+)", text)):
            path = testlogs / uri
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.name == "test.xml":
                cases = [
                    ("test_a", "passed"),
                    ("test_b", outcome if "shard_2" in uri else "passed"),
                ]
                xml = "".join(_case(*c) for c in cases)
                path.write_text(f"<testsuites><testsuite>{xml}</testsuite></testsuites>")
            else:
                path.write_text("collected 2 items\n")
        events.write_text(text.replace("file:///TESTLOGS/", f"file://{testlogs}/"))
        saved = tmp / f"{name}.saved"
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(save_run.main([str(events), str(saved)]), 0)
        shutil.rmtree(tmp / name)  # the saved run stands alone
        return saved

    def test_two_saved_runs_are_compared_case_by_case_with_their_hardware(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            old_pool, new_pool = self._save(tmp, "old", "passed"), self._save(tmp, "new", "failed")
            self.assertTrue((old_pool / "testlogs").is_dir())
            code, err = _gate_quietly(
                f"--baseline=results:{old_pool}",
                f"--candidate=results:{new_pool}",
                f"--out={tmp / 'r'}",
            )
            self.assertEqual(code, gate.EXIT_REGRESSION, err.getvalue())
            data = json.loads((tmp / "r" / "report.json").read_text())
            (item,) = data["comparison"]["regressions"]
            self.assertEqual(
                (item["target"], item["case"]), ("//tools/selftest:probe_shards", "m.C::test_b")
            )
            self.assertTrue(item["log"].startswith(str(new_pool)), item["log"])
            self.assertIn("not confirmed (a saved run", item["confirmation"]["verdict"])
            self.assertEqual(data["comparison"]["coverage"]["cases_compared"], 4)
            self.assertIn("## Hardware", (tmp / "r" / "report.md").read_text())
            # This host's own GPUs, as nvidia-smi lists them (none on a CPU host).
            self.assertEqual(
                data["sides"]["candidate"]["hardware"]["gpu_count"],
                hardware.fingerprint()["gpu_count"],
            )

    def test_a_directory_that_is_no_saved_run_is_a_bad_side(self):
        with tempfile.TemporaryDirectory() as tmp:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = gate.main(["--candidate", f"results:{tmp}", "--out", f"{tmp}/r"])
        self.assertEqual(code, gate.EXIT_BAD_INPUT)
        self.assertIn("is not a saved run: no events.json", err.getvalue())

    def test_the_interconnect_from_nvidia_smi_topo(self):
        topology = (
            "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tNV18\tSYS\t0-63\t0\t\tN/A\n"
            "GPU1\tNV18\t X \tSYS\t0-63\t0\t\tN/A\n"
            "NIC0\tSYS\tSYS\t X \n"
        )
        self.assertEqual(hardware.interconnect(topology), "NV18")
        self.assertEqual(hardware.interconnect(""), "")


def _git(repo: pathlib.Path, *args: str) -> str:
    author = ["-c", "user.name=t", "-c", "user.email=t@t"]
    done = subprocess.run(
        ["git", "-C", str(repo), *author, *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


class SavedRunTreeTest(unittest.TestCase):
    """A saved run records the exact tree it ran, dirty edits and untracked files included."""

    def test_a_dirty_tree_is_recorded_as_the_tree_of_the_same_content_committed(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            repo = tmp / "repo"
            repo.mkdir()
            _git(repo, "init", "-q")
            (repo / ".gitignore").write_text("ignored\n")
            (repo / "f").write_text("a\n")
            (repo / "staged").write_text("s\n")
            _git(repo, "add", "-A")
            _git(repo, "commit", "-qm", "base")
            head, head_tree = (
                _git(repo, "rev-parse", "HEAD"),
                _git(repo, "rev-parse", "HEAD^{tree}"),
            )
            (repo / "f").write_text("b\n")  # an edit
            (repo / "new").write_text("n\n")  # an untracked file
            (repo / "ignored").write_text("i\n")  # not part of the tree
            (repo / "staged").write_text("s2\n")
            _git(repo, "add", "staged")  # an edit in the index
            status = _git(repo, "status", "--porcelain")
            events = RESULTS_TESTDATA / "sharded_fresh.json"
            with _saved_events(tmp, events) as (saved_events, _):
                side = save_run.save(saved_events, tmp / "saved", root=repo)
            self.assertEqual((side["commit"], side["dirty"]), (head, True))
            self.assertNotEqual(side["tree"], head_tree)
            # Recording it touched neither the index nor the working directory.
            self.assertEqual(_git(repo, "status", "--porcelain"), status)
            recorded = json.loads((tmp / "saved" / "side.json").read_text())
            self.assertEqual(recorded["tree"], side["tree"])
            (repo / "ignored").write_text("changed after the run\n")
            _git(repo, "add", "-A")
            _git(repo, "commit", "-qm", "the same content")
            self.assertEqual(_git(repo, "rev-parse", "HEAD^{tree}"), side["tree"])
            # A clean checkout is not dirty and records HEAD's tree.
            with _saved_events(tmp, events) as (saved_events, _):
                clean = save_run.save(saved_events, tmp / "saved-clean", root=repo)
            self.assertEqual((clean["tree"], clean["dirty"]), (side["tree"], False))

    def test_bisect_refuses_a_saved_run_of_another_tree_and_compare_says_it(self):
        here = {"commit": "c1", "tree": "t1", "dirty": False}
        dirty_same = {"commit": "c0", "tree": "t1", "dirty": True}
        other = {"commit": "c1", "tree": "t2", "dirty": True}
        before = {"commit": "c0+diff:abc"}  # saved before trees were recorded
        saved = {"baseline": "/runs/old"}
        # The same tree (dirty or not) is the same sources: bisecting on this checkout is sound.
        self.assertIsNone(tree.bisect_refusal({"baseline": dirty_same}, saved, here))
        for state, said in ((other, "ran tree t2 (commit c1, dirty"), (before, "no recorded")):
            refusal = tree.bisect_refusal({"baseline": state}, saved, here)
            self.assertIn(said, refusal)
            self.assertIn("Gate without --bisect", refusal)
        known = {"t1"}.__contains__
        warned = tree.warnings({"baseline": other, "candidate": here}, saved, known)
        self.assertEqual(len(warned), 3, warned)
        self.assertIn("ran uncommitted changes: tree t2 (commit c1, dirty", warned[0])
        self.assertIn("tree t2 is not in this repository", warned[1])
        self.assertIn("different trees (baseline t2, candidate t1)", warned[2])
        self.assertIn(
            "records no tree",
            tree.warnings({"baseline": before, "candidate": here}, saved, known)[0],
        )
        self.assertEqual(tree.warnings({"baseline": here, "candidate": here}, {}, known), [])

    def test_gate_bisect_against_a_saved_run_of_another_tree_stops_before_running(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            saved = SavedRunTest._save(self, tmp, "old", "passed")
            record = json.loads((saved / "side.json").read_text())
            record["tree"] = "0" * 40  # another tree than this checkout's
            (saved / "side.json").write_text(json.dumps(record))
            new = SavedRunTest._save(self, tmp, "new", "failed")  # a regression to bisect
            code, err = _gate_quietly(
                f"--baseline=results:{saved}",
                f"--candidate=results:{new}",
                "--bisect",
                f"--out={tmp / 'r'}",
            )
            self.assertEqual(code, gate.EXIT_BAD_INPUT, err.getvalue())
            self.assertIn(f"saved run {saved} ran tree {'0' * 40}", err.getvalue())
            self.assertFalse((tmp / "r").exists(), "nothing ran")


def _gate_quietly(*argv: str) -> tuple[int, io.StringIO]:
    """gate.main(argv) with its output held: (exit code, what it wrote to stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        return gate.main(list(argv)), err


@contextlib.contextmanager
def _saved_events(tmp: pathlib.Path, recorded: pathlib.Path, edit=lambda text: text):
    """A recorded build event file (tools/results/testdata) with its testlogs written under tmp;
    yields (events, testlogs)."""
    work = pathlib.Path(tempfile.mkdtemp(dir=tmp))
    testlogs, events = work / "testlogs", work / "events.json"
    text = edit(recorded.read_text())
    for uri in set(re.findall(r"file:///TESTLOGS/([^\"]+)", text)):
        path = testlogs / uri
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("<testsuites><testsuite/></testsuites>" if uri.endswith(".xml") else "")
    events.write_text(text.replace("file:///TESTLOGS/", f"file://{testlogs}/"))
    try:
        yield events, testlogs
    finally:
        shutil.rmtree(work)


class VariantPlanTest(unittest.TestCase):
    """Which variants a gate compares, from each side's torch and its host's GPUs (fake facts)."""

    TABLE = {"cpu": 0, "gpu": 1, "multi_gpu": 2, "gpu_x4": 4, "gpu_x8": 8}

    def _plan(self, baseline, candidate):
        return variant_plan.plan(
            variant_plan.SideFacts("baseline", *baseline),
            variant_plan.SideFacts("candidate", *candidate),
            self.TABLE,
        )

    def test_a_cpu_host_compares_cpu_and_asks_nothing_of_its_sides(self):
        plan = self._plan(("2.13.0+cpu", False, 0), ("2.15.0", True, 0))
        self.assertEqual(plan.compared, ["cpu"])
        self.assertEqual(set(plan.not_compared.values()), {"this host has no GPUs"})
        self.assertEqual(plan.env, {"baseline": {}, "candidate": {}})

    def test_a_cpu_torch_on_a_gpu_host_runs_cpu_variants_and_the_other_side_too(self):
        plan = self._plan(("2.13.0+cpu", False, 4), ("2.11.0+cu130", True, 4))
        self.assertEqual(plan.compared, ["cpu"])
        self.assertEqual(
            plan.not_compared["gpu"], "baseline torch 2.13.0+cpu cannot use this host's 4 GPUs"
        )
        self.assertEqual(
            plan.not_compared["gpu_x8"],
            plan.not_compared["gpu"] + "; candidate: this host has 4 GPUs, gpu_x8 needs 8",
        )
        # Not stopped by the GPU-host check; the GPU side runs no variant it could not compare.
        self.assertEqual(plan.env["baseline"], {"TORCH_TEST_CPU_ONLY": "1"})
        self.assertEqual(plan.env["candidate"], {"TORCH_TEST_GPUS": "0"})
        both_cpu = self._plan(("2.13.0+cpu", False, 2), ("2.14.1+cpu", False, 2))
        self.assertEqual(both_cpu.compared, ["cpu"])
        self.assertIn("; candidate torch 2.14.1+cpu cannot use", both_cpu.not_compared["gpu"])
        self.assertEqual(both_cpu.env["candidate"], {"TORCH_TEST_CPU_ONLY": "1"})

    def test_two_gpu_capable_sides_compare_every_variant_the_host_has(self):
        plan = self._plan(("2.11.0+cu130", True, 4), ("2.11.0+cu130", True, 4))
        self.assertEqual(plan.compared, ["cpu", "gpu", "multi_gpu", "gpu_x4"])
        self.assertEqual(plan.not_compared, {"gpu_x8": "this host has 4 GPUs, gpu_x8 needs 8"})
        self.assertEqual(plan.env, {"baseline": {}, "candidate": {}})

    def test_a_saved_run_of_fewer_gpus_limits_the_live_side(self):
        saved = variant_plan.SideFacts("baseline", "2.11.0+cu130", True, 2, saved=True)
        live = variant_plan.SideFacts("candidate", "2.11.0+cu130", True, 4)
        plan = variant_plan.plan(saved, live, self.TABLE)
        self.assertEqual(plan.compared, ["cpu", "gpu", "multi_gpu"])
        self.assertEqual(
            plan.not_compared["gpu_x4"], "baseline: its saved run's host has 2 GPUs, gpu_x4 needs 4"
        )
        self.assertEqual(plan.env, {"baseline": {}, "candidate": {"TORCH_TEST_GPUS": "2"}})

    def test_a_targets_variant_from_its_tags(self):
        table = {
            "cpu": {"tags": []},
            "gpu": {"tags": ["gpu"]},
            "multi_gpu": {"tags": ["gpu", "multi_gpu"]},
        }
        self.assertEqual(variant_plan.variant_of(("manual",), table), "cpu")
        self.assertEqual(variant_plan.variant_of(("gpu", "nccl"), table), "gpu")
        self.assertEqual(
            variant_plan.variant_of(("multi_gpu", "gpu", "exclusive"), table), "multi_gpu"
        )

    def test_only_targets_of_variants_not_compared_that_ran_somewhere_are_left_out(self):
        table = {"cpu": {"tags": []}, "gpu": {"tags": ["gpu"]}}
        plan = variant_plan.Plan(["cpu"], {"gpu": "this host has no GPUs"}, {})

        def targets(**status):
            return {
                f"//p:{name}": bep.Target(f"//p:{name}", status=s, tags=("gpu",) * ("gpu" in name))
                for name, s in status.items()
            }

        baseline = targets(t="PASSED", t_gpu="PASSED", u_gpu="SKIPPED")
        candidate = targets(t="PASSED", t_gpu="SKIPPED", u_gpu="SKIPPED")
        # SKIPPED on both sides stays where a CPU host has always put it (ran on neither).
        self.assertEqual(
            variant_plan.left_out(baseline, candidate, plan, table), {"//p:t_gpu": "gpu"}
        )

    def test_the_plan_env_reaches_the_sides_bazel(self):
        side = dataclasses.replace(
            sides.parse("candidate", "/usr/bin/python3"), plan_env=(("TORCH_TEST_CPU_ONLY", "1"),)
        )
        self.assertEqual(side.env({})["TORCH_TEST_CPU_ONLY"], "1")

    def test_a_python_side_whose_torch_cannot_use_the_gpus_on_a_gpu_host(self):
        with tempfile.TemporaryDirectory() as tmp:
            smi = pathlib.Path(tmp) / "nvidia-smi"
            smi.write_text("#!/bin/sh\necho 'NVIDIA H200, 580.159.04'\n")
            smi.chmod(0o755)
            python = pathlib.Path(tmp) / "python3"
            # -S: no site-packages, so no torch whatever this interpreter has installed.
            python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
            python.chmod(0o755)
            path = os.environ.get("PATH", "")
            os.environ["PATH"] = f"{tmp}:{path}"
            sides.gpus.cache_clear()
            try:
                facts = sides.gpu_facts(sides.parse("candidate", f"python:{python}"))
                pinned = sides.gpu_facts(sides.parse("baseline", "pinned"))
            finally:
                os.environ["PATH"] = path
                sides.gpus.cache_clear()
        self.assertEqual((facts.cuda, facts.gpus), (False, 1))
        self.assertEqual((pinned.torch, pinned.cuda, pinned.gpus), ("2.13.0+cpu", False, 1))


class SavedGpuVariantTest(unittest.TestCase):
    """A GPU variant that ran on one side only is not compared: no regression, no pass."""

    def test_a_gpu_target_saved_on_a_gpu_host_against_a_cpu_hosts_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            gpu_tags = ('"tag":["manual"]', '"tag":["gpu","manual"]')
            runs = {}
            for name, outcome, gpus in (("gpu_host", "passed", 2), ("cpu_host", "failed", 0)):
                runs[name] = SavedRunTest._save(self, tmp, name, outcome, tags=gpu_tags)
                record = json.loads((runs[name] / "side.json").read_text())
                record["hardware"].update(
                    gpu_count=gpus,
                    torch="2.11.0+cu130" if gpus else "2.13.0+cpu",
                    torch_cuda="13.0" if gpus else None,
                )
                (runs[name] / "side.json").write_text(json.dumps(record))
            code, err = _gate_quietly(
                f"--baseline=results:{runs['gpu_host']}",
                f"--candidate=results:{runs['cpu_host']}",
                f"--out={tmp / 'r'}",
            )
            data = json.loads((tmp / "r" / "report.json").read_text())
            markdown = (tmp / "r" / "report.md").read_text()
        result = data["comparison"]
        self.assertEqual(code, 0, err.getvalue())
        self.assertEqual((result["regressions"], result["fixes"]), ([], []))
        # Only the cpu target is compared (test_a and test_b of probe_plain).
        self.assertEqual(result["coverage"]["cases_compared"], 2)
        self.assertNotIn("//tools/selftest:probe_shards", data["target_status"])
        self.assertEqual(data["variants"]["compared"], ["cpu"])
        gpu = next(v for v in data["variants"]["not_compared"] if v["variant"] == "gpu")
        self.assertEqual(gpu["reason"], "candidate: its saved run's host has no GPUs")
        self.assertEqual(gpu["targets"], ["//tools/selftest:probe_shards"])
        self.assertIn("**Variants compared on both sides:** cpu.", markdown)
        self.assertIn(
            "- `gpu`, `multi_gpu` not compared: candidate: its saved run's host has no GPUs "
            "(1 target that ran on one side left out of the comparison)",
            markdown,
        )


class PatternsTest(unittest.TestCase):
    """A saved run's targets are compared where the gate's patterns select them."""

    def test_patterns_select_as_bazel_reads_them(self):
        label = "//dynamo_tests:test_aot_autograd"
        for selected in (["//..."], ["dynamo_tests/..."], ["//dynamo_tests:all"], [label]):
            self.assertTrue(patterns.matches(label, selected), selected)
        for not_selected in (
            ["//upstream_style_tests/..."],
            ["//dynamo_tests:test_recompile_ux"],
            ["//dynamo"],  # a package is its namesake target, not a prefix
            ["//...", "-//dynamo_tests/..."],
            [],
        ):
            self.assertFalse(patterns.matches(label, not_selected), not_selected)
        self.assertTrue(patterns.matches("//a/b:b", ["//a/b"]))
        self.assertTrue(patterns.matches("//a/b/c:t", ["//a/..."]))
        self.assertFalse(patterns.matches("//ab:t", ["//a/..."]))
        # Left to right: a later pattern adds back what an earlier one took out.
        self.assertTrue(patterns.matches(label, ["-//dynamo_tests/...", "//dynamo_tests:all"]))

    def test_a_saved_run_of_more_targets_than_asked_is_compared_over_those_asked(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            runs = {
                name: SavedRunTest._save(self, tmp, name, "passed") for name in ("pool", "here")
            }
            code, err = _gate_quietly(
                f"--baseline=results:{runs['pool']}",
                f"--candidate=results:{runs['here']}",
                f"--out={tmp / 'r'}",
                "//tools/selftest:probe_plain",
            )
            data = json.loads((tmp / "r" / "report.json").read_text())
        self.assertEqual(code, 0, err.getvalue())
        self.assertEqual(sorted(data["target_status"]), ["//tools/selftest:probe_plain"])
        self.assertIn("1 others it holds left out", data["targets"])


class BisectTest(unittest.TestCase):
    def test_releases_between_the_sides(self):
        index = ["2.15.0", "2.14.1", "2.14.0", "2.13.0+cpu", "2.13.0", "2.12.1"]
        self.assertEqual(culprit.between("2.13.0+cpu", "2.15.0", index), ["2.14.0", "2.14.1"])

    def test_the_first_release_that_changed_and_a_flip_back(self):
        steps = [("2.13.0+cpu", "passed"), ("2.14.0", "passed"), ("2.14.1", "failed")]
        self.assertEqual(
            culprit.verdict([*steps, ("2.15.0", "failed")]),
            "first changed in 2.14.1 (2.13.0 passed, 2.14.0 passed, 2.14.1 failed, 2.15.0 failed)",
        )
        self.assertEqual(
            culprit.verdict(
                [steps[0], ("2.14.0", "failed"), ("2.14.1", "passed"), ("2.15.0", "failed")]
            ),
            "first changed in 2.14.0 (2.13.0 passed, 2.14.0 failed, 2.14.1 passed, 2.15.0 failed); "
            "not monotonic: 2.14.1 passed again",
        )

    def test_each_case_runs_alone_on_each_release_between(self):
        asked = []

        def run_case(release, label, ids):
            asked.append((release, label, ids))
            return {ids[0]: "failed" if release == "2.14.1" else "passed"}

        item = {
            "target": "//p:t",
            "node_id": "t.py::C::x",
            "baseline": "passed",
            "candidate": "failed",
            "confirmation": {"verdict": "consistent"},
        }
        flaky = {**item, "node_id": "t.py::C::y", "confirmation": {"verdict": "flaky"}}
        original = culprit.available
        culprit.available = lambda: ["2.15.0", "2.14.1", "2.14.0", "2.13.0"]
        try:
            culprit.bisect([item, flaky], "2.13.0+cpu", "2.15.0+cu132", run_case)
        finally:
            culprit.available = original
        self.assertEqual(
            asked, [("2.14.0", "//p:t", ["t.py::C::x"]), ("2.14.1", "//p:t", ["t.py::C::x"])]
        )
        self.assertTrue(item["bisect"]["line"].startswith("first changed in 2.14.1 ("))
        # A flaky case is not run per release: one run each would name a release by chance.
        self.assertEqual(flaky["bisect"]["line"], "not bisected: flaky")


class CandidateTest(unittest.TestCase):
    def test_spec_pins_torch_and_keeps_every_other_requirement(self):
        pinned = candidate.requirements("torch==2.15.0")
        self.assertIn("torch==2.15.0", pinned)
        self.assertEqual([r for r in pinned if r.startswith("torch==")], ["torch==2.15.0"])
        self.assertIn("transformers==5.23.0", pinned)
        self.assertNotEqual(
            candidate.venv_dir("torch==2.15.0"), candidate.venv_dir("torch==2.14.1")
        )
        self.assertFalse(candidate.is_spec("lock:/x.lock"))

    def test_a_load_failure_names_the_library_and_the_missing_symbol(self):
        # The tail of `import fbgemm_gpu` with fbgemm-gpu-cpu 1.9.0 on torch 2.15.0.
        stderr = (
            "Traceback (most recent call last):\n"
            "OSError: /v/site-packages/fbgemm_gpu/fbgemm_gpu_py.so: undefined symbol: "
            "_ZN3c1015report_overflowEPKc\n"
            "OSError: Could not load this library: /v/site-packages/fbgemm_gpu/fbgemm_gpu_py.so\n"
        )
        self.assertEqual(
            candidate._last_error_line(stderr),
            "fbgemm_gpu_py.so: undefined symbol _ZN3c1015report_overflowEPKc",
        )


if __name__ == "__main__":
    unittest.main()
