"""Self-tests of tools/results: BEP files recorded from Bazel 4.2.3, and pytest's JUnit forms."""

import contextlib
import io
import os
import pathlib
import shutil
import tempfile
import unittest

from tools.results import bep, facts, junit, outcomes, record, shard_rows

TESTDATA = pathlib.Path(__file__).resolve().parent / "testdata"


def _read(name: str, testlogs: pathlib.Path = pathlib.Path("/TESTLOGS")) -> dict:
    text = (TESTDATA / f"{name}.json").read_text()
    return bep.parse(text.replace("file:///TESTLOGS/", f"file://{testlogs}/").splitlines())


class BepTest(unittest.TestCase):
    def test_sharded_target_fresh_then_cached(self):
        for name, cached in (("sharded_fresh", False), ("sharded_cached", True)):
            targets = _read(name)
            self.assertEqual(
                list(targets), ["//tools/selftest:probe_plain", "//tools/selftest:probe_shards"]
            )
            shards = targets["//tools/selftest:probe_shards"]
            self.assertEqual(
                (shards.status, shards.cached, shards.shard_count), ("PASSED", cached, 3)
            )
            self.assertEqual(
                [(a.shard, a.run) for a in shards.final_attempts()], [(1, 1), (2, 1), (3, 1)]
            )
            self.assertEqual(
                shards.final_attempts()[1].xml,
                pathlib.Path("/TESTLOGS/tools/selftest/probe_shards/shard_2_of_3/test.xml"),
            )

    def test_every_run_of_runs_per_test(self):
        shards = _read("runs_per_test")["//tools/selftest:probe_shards"]
        self.assertEqual(shards.run_count, 2)
        self.assertEqual(len(shards.final_attempts()), 6)
        self.assertIn(
            pathlib.Path("/TESTLOGS/tools/selftest/probe_shards/shard_3_of_3_run_2_of_2/test.log"),
            [a.log for a in shards.final_attempts()],
        )

    def test_flaky_attempts_keep_the_last_one(self):
        shards = _read("failed_with_flaky_attempts")["//tools/selftest:probe_shards"]
        self.assertEqual(shards.status, "FAILED")
        self.assertEqual(len(shards.attempts), 6)
        final = shards.final_attempts()
        self.assertEqual([a.attempt for a in final], [2, 2, 2])
        self.assertEqual(final[0].log.name, "test.log")  # earlier ones: test_attempts/attempt_1.log

    def test_incompatible_target_is_skipped_and_filtered_tests_are_not_listed(self):
        targets = _read("incompatible_skipped")
        # test_aot_autograd & co. were left out by --test_tag_filters=gpu: not results.
        self.assertEqual(
            {k: t.status for k, t in targets.items()},
            {"//dynamo_tests:test_recompile_ux_gpu": "SKIPPED"},
        )

    def test_explicitly_named_incompatible_target_is_skipped(self):
        # `bazel test --keep_going` naming //dynamo_tests:test_recompile_ux_gpu and
        # //tools/selftest:probe_plain on a host without GPUs: Bazel aborts the GPU target with
        # no reason given.
        targets = _read("explicit_incompatible")
        self.assertEqual(
            {k: t.status for k, t in targets.items()},
            {
                "//dynamo_tests:test_recompile_ux_gpu": "SKIPPED",
                "//tools/selftest:probe_plain": "PASSED",
            },
        )

    def test_incompatible_target_a_negative_pattern_excludes_is_no_result(self):
        # `bazel test -- //... -//dynamo_tests:test_torchrec` where torchrec is missing (host
        # mode): Bazel 4.2.3 still configures the excluded target and aborts it as SKIPPED
        # (events of that target, from the gate's candidate run).
        self.assertEqual(_read("excluded_incompatible"), {})

    def test_build_failure_and_no_status(self):
        targets = _read("failed_to_build")
        # The failed genrule //fixture:broken is no test: only the tests are listed.
        self.assertEqual(
            {k: t.status for k, t in targets.items()},
            {"//fixture:t_broken": "FAILED TO BUILD", "//fixture:t_ok": "PASSED"},
        )
        targets = _read("no_status")
        self.assertEqual(targets["//fixture:t_broken"].status, "NO STATUS")
        self.assertEqual(
            (targets["//fixture:t_ok"].status, targets["//fixture:t_ok"].cached), ("PASSED", True)
        )

    def test_announced_summary_never_posted_is_no_status(self):
        lines = [
            line
            for line in (TESTDATA / "sharded_fresh.json").read_text().splitlines()
            if '"testSummary":{"totalRunCount"' not in line
        ]
        self.assertEqual(bep.parse(lines)["//tools/selftest:probe_plain"].status, "NO STATUS")

    def test_xml_files_exist_on_disk(self):
        with tempfile.TemporaryDirectory() as tmp:
            xml = pathlib.Path(tmp, "tools/selftest/probe_plain/test.xml")
            xml.parent.mkdir(parents=True)
            xml.write_text("<testsuites/>")
            targets = _read("sharded_fresh", pathlib.Path(tmp))
            self.assertEqual(targets["//tools/selftest:probe_plain"].xml_files(), [xml])
            self.assertEqual(targets["//tools/selftest:probe_shards"].xml_files(), [])

    def test_exec_root_from_the_workspace_event(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp, "events.json")
            path.write_text(
                '{"id":{"started":{}},"started":{}}\n'
                '{"id":{"workspace":{}},"workspaceInfo":{"localExecRoot":"/ob/execroot/torch_tests"}}\n'
            )
            self.assertEqual(bep.exec_root(path), pathlib.Path("/ob/execroot/torch_tests"))


class OwnOutputsTest(unittest.TestCase):
    """An older build event file read after a newer run must not report the newer run's files.

    Recorded: `tools/bazel test --nocache_test_results //tools/selftest:probe_plain` twice
    (rerun_1.json, rerun_2.json); the second run rewrote the test.xml and test.log the first
    names. The files are written here with the time the second run wrote them.
    """

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = pathlib.Path(tmp.name)
        # Run 2's attempt started at ...62.701 and took 0.883 s: it wrote its files then.
        written = 1795672862.701 + 0.883
        for name in ("test.xml", "test.log"):
            path = self.tmp / "tools/selftest/probe_plain" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("<testsuites/>" if name == "test.xml" else "log\n")
            os.utime(path, (written, written))
        self.xml = self.tmp / "tools/selftest/probe_plain/test.xml"
        self.events = {}
        for n in (1, 2):
            text = (TESTDATA / f"rerun_{n}.json").read_text()
            self.events[n] = self.tmp / f"rerun_{n}.json"
            self.events[n].write_text(text.replace("file:///TESTLOGS/", f"file://{self.tmp}/"))

    def _plain(self, n: int) -> bep.Target:
        return bep.read(self.events[n])["//tools/selftest:probe_plain"]

    def test_the_invocation_ends_at_its_build_finished_event(self):
        self.assertEqual(bep.finished_s(self.events[1]), 1795672860.332)
        self.assertEqual(bep.finished_s(self.events[2]), 1795672863.8)

    def test_the_newer_run_reads_its_own_files(self):
        self.assertEqual(self._plain(2).xml_files(), [self.xml])

    def test_the_older_run_refuses_files_the_newer_run_wrote(self):
        plain = self._plain(1)
        self.assertEqual(plain.status, "PASSED")  # statuses are the invocation's own
        for read in (plain.xml_files, plain.log_files):
            with self.assertRaises(bep.OutputsReplaced) as caught:
                read()
        message = str(caught.exception)
        log = self.xml.with_name("test.log")
        self.assertIn(f"//tools/selftest:probe_plain shard 1 run 1 attempt 1: {log}", message)
        self.assertIn("after the invocation ended", message)
        self.assertIn("a later `bazel test` replaced this invocation's file", message)

    def test_a_file_a_later_run_removed_is_refused(self):
        self.xml.unlink()
        with self.assertRaisesRegex(bep.OutputsReplaced, "test.xml is gone"):
            self._plain(2).final_attempts()[0].output("test.xml")


class OutcomesTest(unittest.TestCase):
    """outcomes.py: what tools/selftest/*.sh judge Bazel by, on the recorded invocations."""

    def test_one_line_per_target(self):
        self.assertEqual(
            [outcomes.line(t) for t in _read("sharded_fresh").values()],
            [
                "//tools/selftest:probe_plain PASSED fresh",
                "//tools/selftest:probe_shards PASSED fresh shards 3: PASSED PASSED PASSED",
            ],
        )
        self.assertEqual(
            outcomes.line(_read("runs_per_test")["//tools/selftest:probe_plain"]),
            "//tools/selftest:probe_plain PASSED fresh shards 1 runs 2: PASSED PASSED",
        )
        self.assertEqual(
            [outcomes.line(t) for t in _read("no_status").values()],
            ["//fixture:t_broken NO STATUS fresh", "//fixture:t_ok PASSED cached"],
        )

    def test_expect_status_and_cache(self):
        fresh, cached = _read("sharded_fresh"), _read("sharded_cached")
        plain = "//tools/selftest:probe_plain"
        self.assertIsNone(outcomes.expect(fresh, plain, "PASSED", "fresh"))
        self.assertIsNone(outcomes.expect(cached, plain, "PASSED", "cached"))
        self.assertIsNone(outcomes.expect(cached, plain, "PASSED", "any"))
        self.assertEqual(
            outcomes.expect(fresh, plain, "PASSED", "cached"),
            "found //tools/selftest:probe_plain PASSED fresh",
        )
        self.assertEqual(
            outcomes.expect(cached, plain, "PASSED", "fresh"),
            "found //tools/selftest:probe_plain PASSED cached",
        )
        self.assertIsNotNone(outcomes.expect(fresh, plain, "FAILED", "any"))
        self.assertEqual(outcomes.expect(fresh, "//x:y", "PASSED", "any"), "no result for //x:y")
        with self.assertRaises(ValueError):
            outcomes.expect(fresh, plain, "PASSED", "(cached)")

    def test_expect_skipped_failed_and_not(self):
        skipped = _read("incompatible_skipped")
        gpu = "//dynamo_tests:test_recompile_ux_gpu"
        self.assertIsNone(outcomes.expect(skipped, gpu, "SKIPPED", "any"))
        self.assertIsNotNone(outcomes.expect(skipped, gpu, "PASSED", "any"))
        failed = _read("failed_to_build")
        self.assertIsNone(outcomes.expect(failed, "//fixture:t_broken", "FAILED TO BUILD", "any"))
        self.assertIsNone(outcomes.expect(failed, "//fixture:t_broken", "!PASSED", "any"))
        self.assertIsNone(outcomes.expect(failed, "//x:no_result", "!PASSED", "any"))
        self.assertEqual(
            outcomes.expect(failed, "//fixture:t_ok", "!PASSED", "any"),
            "found //fixture:t_ok PASSED fresh",
        )

    def test_expect_none(self):
        self.assertIsNone(outcomes.expect_none(_read("sharded_fresh"), "SKIPPED"))
        self.assertEqual(
            outcomes.expect_none(_read("explicit_incompatible"), "SKIPPED"),
            "found //dynamo_tests:test_recompile_ux_gpu SKIPPED fresh",
        )

    def test_expect_shards_by_final_attempts(self):
        shards = "//tools/selftest:probe_shards"
        self.assertIsNone(outcomes.expect_shards(_read("sharded_cached"), shards, 3, "PASSED"))
        # Every shard failed twice (--flaky_test_attempts=2): the final attempts count.
        flaky = _read("failed_with_flaky_attempts")
        self.assertIsNone(outcomes.expect_shards(flaky, shards, 3, "FAILED"))
        self.assertIsNotNone(outcomes.expect_shards(flaky, shards, 2, "FAILED"))
        self.assertIsNotNone(outcomes.expect_shards(flaky, shards, 3, "PASSED"))
        # Three shards of two runs each are not three shards run once.
        self.assertIsNotNone(outcomes.expect_shards(_read("runs_per_test"), shards, 3, "PASSED"))
        self.assertIsNotNone(
            outcomes.expect_shards(
                _read("sharded_fresh"), "//tools/selftest:probe_plain", 3, "PASSED"
            )
        )

    def test_command_line_exit_codes(self):
        events = str(TESTDATA / "failed_with_flaky_attempts.json")
        shards = "//tools/selftest:probe_shards"
        with contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(outcomes.main([events]), 0)
            self.assertEqual(outcomes.main([events, "--expect", shards, "FAILED", "fresh"]), 0)
            self.assertEqual(outcomes.main([events, "--expect-shards", shards, "3", "FAILED"]), 0)
            self.assertEqual(outcomes.main([events, "--expect-none", "SKIPPED"]), 0)
        self.assertEqual(out.getvalue(), f"{shards} FAILED fresh shards 3: FAILED FAILED FAILED\n")
        with contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(outcomes.main([events, "--expect", shards, "PASSED", "fresh"]), 1)
            self.assertEqual(outcomes.main([events, "--expect-none", "FAILED"]), 1)
            self.assertEqual(outcomes.main(["/nonexistent/events.json", "--expect-none", "X"]), 2)
        self.assertIn(f"found {shards} FAILED fresh", out.getvalue())
        self.assertIn("no build event file", out.getvalue())

    def test_error_lines_of_the_invocation(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp, "events.json")
            path.write_text(
                '{"id":{"progress":{}},"progress":{"stderr":"INFO: x\\nERROR: no target\\n"}}\n'
            )
            self.assertEqual(outcomes.errors(path), ["ERROR: no target"])


JUNIT = (
    '<testsuites><testsuite name="t">'
    '<testcase classname="m.C" name="test_pass" file="m.py" time="1.5"/>'
    '<testcase classname="pkg.t_x.C" name="test_p[relu inplace]" file="pkg/t_x.py">'
    '<properties><property name="torch_test.declared" value="fail: known"/></properties>'
    '<failure message="boom"/></testcase>'
    '<testcase classname="m.C" name="test_fail" time="2">'
    '<failure message="AssertionError: 1 != 2&#10;more">tb</failure></testcase>'
    '<testcase classname="m.C" name="test_error"><error message="error in setup">tb</error>'
    "</testcase>"
    '<testcase classname="m.C" name="test_skip">'
    '<skipped type="pytest.skip" message="no gpu">x</skipped></testcase>'
    '<testcase classname="m.C" name="test_xfail">'
    '<skipped type="pytest.xfail" message="known bug"/></testcase>'
    '<testcase classname="m.C" name="test_xpass_strict">'
    '<failure message="[XPASS(strict)] known bug"/></testcase>'
    '<testcase classname="m.C" name="test_unexpected">'
    '<failure message="Unexpected success"/></testcase>'
    "</testsuite></testsuites>"
)


class JunitTest(unittest.TestCase):
    def test_outcomes(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp, "test.xml")
            path.write_text(JUNIT)
            cases = junit.cases(path)
        found = {c.name: (c.case.outcome, c.case.message, c.case.stale) for c in cases}
        marker = {"by": "marker"}  # an unexpected success: its marker is stale
        self.assertEqual(
            found,
            {
                "test_pass": ("passed", "", None),
                "test_fail": ("failed", "AssertionError: 1 != 2", None),
                "test_error": ("failed", "error in setup", None),
                "test_skip": ("skipped", "no gpu", None),
                "test_xfail": ("xfail", "known bug", None),
                "test_xpass_strict": ("failed", "[XPASS(strict)] known bug", marker),
                "test_unexpected": ("failed", "Unexpected success", marker),
                # A failure beside a declared fail (which reads as xfail) is no declared fail.
                "test_p[relu inplace]": (
                    "failed",
                    "declared fail: known, but it failed: boom",
                    None,
                ),
            },
        )
        self.assertEqual((cases[0].id, cases[0].time_s), ("m.C::test_pass", 1.5))

    def test_declared_and_not_applicable_properties(self):
        # As pytest writes item.user_properties (xunit1) for tools.runner.session.outcome_audit.
        xml = (
            '<testsuites><testsuite name="t">'
            '<testcase classname="m" name="test_declared"><properties>'
            '<property name="torch_test.declared" value="fail: bug 7" /></properties>'
            '<skipped type="pytest.xfail" message="declared: bug 7" /></testcase>'
            '<testcase classname="m" name="test_mps"><properties>'
            '<property name="torch_test.not_applicable" value="needs mps" /></properties>'
            '<skipped type="pytest.skip" message="not applicable to this hardware table: needs '
            'mps" /></testcase>'
            '<testcase classname="m" name="test_plain" />'
            '<testcase classname="m" name="test_stale"><properties>'
            '<property name="torch_test.declared" value="skip: no gpu" /></properties>'
            "</testcase>"
            '<testcase classname="m" name="test_other"><properties>'
            '<property name="torch_test.declared" value="skip: not applicable: odd" />'
            '</properties><error message="error in setup" /></testcase>'
            "</testsuite></testsuites>"
        )
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp, "test.xml")
            path.write_text(xml)
            found = {c.name: c.case for c in junit.cases(path)}
        self.assertEqual(
            {n: (c.outcome, c.declaration) for n, c in found.items()},
            {
                "test_declared": ("declared_fail", "fail: bug 7"),
                "test_mps": ("not_applicable", "not applicable: needs mps"),
                "test_plain": ("passed", None),
                "test_stale": ("failed", None),
                # A reason that begins as a kind does is a reason: its kind is the property's.
                "test_other": ("failed", None),
            },
        )
        self.assertEqual(found["test_stale"].stale, {"by": "expectations", "outcome": "skip"})
        self.assertEqual(
            found["test_other"].detail,
            "declared skip: not applicable: odd, but it error: error in setup",
        )

    def test_node_id_and_declared_outcome(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp, "test.xml")
            path.write_text(JUNIT)
            param = next(c for c in junit.cases(path) if c.name.startswith("test_p["))
        self.assertEqual(param.node_id, "pkg/t_x.py::C::test_p[relu inplace]")
        self.assertEqual((param.case.outcome, param.case.declaration), ("failed", None))


HUNG = "tools/gate/fixtures/hangs_on_candidate.py::test_hangs"


class TimeoutTest(unittest.TestCase):
    """A target Bazel timed out (recorded: //tools/gate/fixtures:hangs_on_candidate)."""

    def test_the_nameless_testcase_pytest_leaves_after_sigterm_is_no_case(self):
        cases = junit.cases(TESTDATA / "timeout.test.xml")
        self.assertEqual([(c.name, c.case.outcome) for c in cases], [("test_known_bad", "failed")])

    def test_hang_names_the_running_test_and_its_stack(self):
        # The recorded run's stack (faulthandler's, innermost first), as the record holds it.
        dump = (TESTDATA / "timeout.test.log").read_text().splitlines()
        stack = "\n".join(reversed([line for line in dump if line.startswith("  File ")]))
        running, shown = facts.hang(
            record.ShardRecord(interrupted=HUNG, interrupted_stack=stack, last_started=HUNG)
        )
        self.assertEqual(running, HUNG)
        self.assertIn('File "torch_tests/tools/gate/fixtures/hangs_on_candidate.py", line', shown)
        self.assertIn("in test_hangs", shown)
        self.assertNotIn("bazel-sandbox", shown)
        self.assertEqual(len(shown.splitlines()), facts.STACK_LINES)

    def test_a_record_without_a_sigterm_is_no_hang(self):
        self.assertIsNone(facts.hang(record.ShardRecord(last_started=HUNG)))
        self.assertIsNone(facts.hang(None))

    def test_a_sigterm_between_cases_names_the_last_that_started(self):
        stopped = record.ShardRecord(last_started=HUNG, interrupted_stack='  File "x.py"')
        self.assertEqual(facts.hang(stopped), (HUNG, '  File "x.py"'))


class RecordTest(unittest.TestCase):
    """The runner's record in test.xml: junit.cases' outcomes and facts.py's facts."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.xml = pathlib.Path(tmp.name, "test.xml")
        shutil.copyfile(TESTDATA / "timeout.test.xml", self.xml)  # pytest: test_known_bad failed

    def _write(self, **fields) -> None:
        record.write(self.xml, record.ShardRecord(**fields))

    def test_the_witness_gives_the_outcome_and_pytest_the_seconds(self):
        base = "tools/gate/fixtures/hangs_on_candidate.py::"
        self._write(
            cases={
                base + "test_known_bad": record.Case("passed"),
                base + "test_hangs": record.Case("never_ran", "its test protocol never ran"),
                base + "T::test_d": record.Case("declared_fail", "ValueError: x", "bug 7"),
                base + "T::test_s": record.Case("declared_skip", "needs cuda", "no cuda"),
                base + "T::test_n[a::b]": record.Case("not_applicable", "needs mps"),
            }
        )
        found = {c.node_id: c for c in junit.cases(self.xml)}
        bad = found[base + "test_known_bad"]
        self.assertEqual((bad.case.outcome, bad.time_s), ("passed", 0.001))
        self.assertEqual(bad.id, "tools.gate.fixtures.hangs_on_candidate::test_known_bad")
        # The id of a case pytest never reported is the one pytest would have given it.
        hung = found[base + "test_hangs"]
        self.assertEqual(
            (hung.case.outcome, hung.id), ("never_ran", junit.case_id(base + "test_hangs"))
        )
        self.assertEqual(hung.id, "tools.gate.fixtures.hangs_on_candidate::test_hangs")
        self.assertEqual(
            {n: c.case.declaration for n, c in found.items() if "T::" in n},
            {
                base + "T::test_d": "fail: bug 7",
                base + "T::test_s": "skip: no cuda",
                base + "T::test_n[a::b]": "not applicable: needs mps",
            },
        )
        self.assertEqual(found[base + "T::test_n[a::b]"].name, "test_n[a::b]")
        self.assertEqual(
            junit.shard_counts(self.xml), {"passed": 1, "declared": 2, "n/a": 1, "never ran": 1}
        )

    def test_facts(self):
        lease = record.Lease([0, 1], 2.5, True, "needs ~2000 MiB: 2 of 16 slots", 0.125)
        used = record.Resources(wall_s=3.0, cpu_s=2.0, peak_rss_mib=300, children_peak_rss_mib=900)
        self._write(lease=lease, resources=used, problems=["", "stale expectations\nmore"])
        rec = facts.of(bep.Attempt(1, 1, 1, "FAILED", False, 4.0, {"test.xml": self.xml}))
        self.assertEqual((facts.peak_rss_mib(rec), facts.wall_s(rec)), (900, 3.0))
        self.assertEqual(
            facts.lease_row(rec),
            {"gpus": "[0, 1]", "wait_s": 2.5, "share": "shared: needs ~2000 MiB: 2 of 16 slots"},
        )
        self.assertEqual(facts.first_error(rec, "E   AssertionError"), "stale expectations")
        self.assertEqual(facts.first_error(None, "x\nE   AssertionError: y\n"), "AssertionError: y")
        self.assertEqual(
            facts.first_error(None, "collected 1 item\nFatal Python error: Aborted\n\n"),
            "Fatal Python error: Aborted",
        )
        self.assertEqual((facts.lease_row(None), facts.peak_rss_mib(None)), ({}, None))

    def test_shard_rows_take_the_lease_from_the_record(self):
        lease = record.Lease([3], 0.5, False, "no peak GPU memory recorded for this target")
        self._write(lease=lease, cases={"t.py::test_a": record.Case("passed")})
        attempt = bep.Attempt(1, 1, 1, "PASSED", False, 4.0, {"test.xml": self.xml})
        target = bep.Target("//p:t", status="PASSED", attempts=[attempt])
        (row,) = shard_rows.shard_rows({"//p:t": target})
        self.assertEqual(
            (row["cases"], row["gpus"], row["wait_s"], row["share"]),
            ({"passed": 1}, "[3]", 0.5, "whole: no peak GPU memory recorded for this target"),
        )


class ExcludedTest(unittest.TestCase):
    def test_negative_patterns_leave_their_targets_out(self):
        patterns = ["//...", "-//dynamo_tests:test_torchrec", "-//a/...", "-//b:all"]
        self.assertTrue(bep.excluded("//dynamo_tests:test_torchrec", patterns))
        self.assertTrue(bep.excluded("//a/c:t", patterns))
        self.assertTrue(bep.excluded("//b:t", patterns))
        self.assertFalse(bep.excluded("//dynamo_tests:test_aot_autograd", patterns))
        self.assertFalse(bep.excluded("//ab:t", patterns))
        self.assertFalse(bep.excluded("//b/c:t", patterns))


if __name__ == "__main__":
    unittest.main()
