"""The gate through real Bazel, on the tiny targets of tools/gate/fixtures (no torch in them).

    python3 tools/gate/selftest_bazel.py        # ~2-3 min on 2 busy cores; CI runs it

Both sides are the pinned lock (one output base, results read after each side's run); the
fixtures misbehave on the candidate side only, told by a role file this test writes before each
side's `bazel test` (Gate.run is wrapped to do it). Checks what fake BEP/XML pairs cannot: what
Bazel 4.2.3 and pytest really write for a FLAKY target, a TIMEOUT in a red target (SIGTERM's
nameless testcase), a re-run of a parametrized id with a space, a case that ran on the
baseline only, a skip and a class never collected on both sides, a --repeat run that aborts
(SIGABRT) or skips, two runs saved by save_run compared as `results:` sides, and a (faked)
GPU host whose GPUs neither side's torch can use.
"""

import contextlib
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from tools.gate import gate, save_run, sides  # noqa: E402

FIXTURES = "//tools/gate/fixtures"
# A host-mode interpreter whose torch is a CPU build: a venv that imports the pinned @pypi's
# packages (a .pth file). A fixed path, so the gate reuses its side's output base.
CPU_TORCH_VENV = gate.CACHE / "torch_tests" / "gate-selftest" / "cpu-torch-venv"


def _cpu_torch_interpreter() -> pathlib.Path:
    def bazel(*args: str) -> str:
        pinned = sides.Side("baseline", "pinned", sides.PINNED_LOCK).env(os.environ)
        command = [str(gate.BAZEL), *args]
        done = subprocess.run(command, cwd=gate.ROOT, env=pinned, capture_output=True, text=True)
        return done.stdout.strip()

    bazel("fetch", "@pypi//:torch")  # the pinned packages, as the gate's pinned side has them
    base = bazel("info", "output_base")
    site = pathlib.Path(base) / "external" / "pypi" / "site"
    python = CPU_TORCH_VENV / "bin" / "python3"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", CPU_TORCH_VENV], check=True)
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (pathlib.Path(purelib) / "pinned_pypi.pth").write_text(f"{site}\n")
    return python


class GateThroughBazel(unittest.TestCase):
    def _tmp(self) -> tuple[pathlib.Path, pathlib.Path]:
        tmp = pathlib.Path(tempfile.mkdtemp(prefix="gate_selftest."))
        self.addCleanup(shutil.rmtree, tmp, True)
        state = tmp / "state"
        state.mkdir()
        return tmp, state

    def _gate(self, *targets: str, extra=()) -> tuple[int, dict, str]:
        tmp, state = self._tmp()
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
            *extra,
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
        # FLAKY on the candidate (its first attempt only fails, then every re-run passes):
        # 1 of 5 against 0 of 5 is not significant, and not green: not decided (exit 4).
        (flaky,) = [
            i
            for i in data["comparison"]["not_decided"]
            if i["target"].endswith("flaky_on_candidate")
        ]
        self.assertEqual(flaky.get("flaky_attempts"), "failed 1 of 2 attempts")
        self.assertEqual(flaky["rates"]["candidate"]["failed"], 1)
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
        # The re-runs on both sides select the id with a space and prove they ran it.
        param = regressions[("param_fails_on_candidate", "test_param[relu inplace]")]
        self.assertEqual(
            param["confirmation"], {"verdict": "consistent", "failed_runs": 5, "runs": 5}
        )
        self.assertEqual(param["rates"]["baseline"]["runs"], 5)
        self.assertNotIn(("param_fails_on_candidate", "test_param[plain]"), regressions)
        # Evidence stays in the report directory.
        for item in (hang, param):
            self.assertIn("/logs/", item["log"])
            self.assertTrue(pathlib.Path(item["log"]).is_file())
            self.assertTrue(item["rerun_logs"])
            self.assertIn("--test_env=TORCH_TEST_NODE_IDS=", param["reproduce"])

    def test_a_case_that_did_not_run_on_both_sides_is_incomplete(self):
        code, data, err = self._gate(
            f"{FIXTURES}:case_vanishes_on_candidate",
            f"{FIXTURES}:skips_on_both_sides",
            f"{FIXTURES}:class_never_collected",
        )
        self.assertEqual(code, gate.EXIT_INCOMPLETE, err)
        reasons = {
            (i["target"].split(":")[-1], (i["case"] or "").split("::")[-1]): i["reason"]
            for i in data["comparison"]["one_side"]
        }
        self.assertEqual(len(reasons), 3, reasons)
        self.assertEqual(
            reasons[("case_vanishes_on_candidate", "test_mode[gone]")], "vanished on the candidate"
        )
        self.assertEqual(
            reasons[("skips_on_both_sides", "test_skips")],
            "skipped on both sides (not on this host)",
        )
        never = reasons[("class_never_collected", "")]
        self.assertTrue(never.startswith("never collected on both sides: "), never)
        self.assertIn("Inherits", never)
        # Only cases that ran on both sides: test_mode[kept] and the two test_runs.
        self.assertEqual(data["comparison"]["coverage"]["cases_compared"], 3)
        self.assertEqual(
            data["target_status"][f"{FIXTURES}:skips_on_both_sides"]["candidate"], "FAILED"
        )

    def test_repeat_runs_every_target_again_on_both_sides(self):
        code, data, err = self._gate(
            f"{FIXTURES}:aborts_in_repeat", f"{FIXTURES}:skips_in_repeat", extra=["--repeat=1"]
        )
        self.assertEqual(code, gate.EXIT_REGRESSION, err)
        found = {
            (r["target"].split(":")[-1], (r["case"] or "").split("::")[-1]): r
            for r in data["comparison"]["regressions"]
        }
        self.assertEqual(len(found), 2, found)
        # The candidate's second run of each: aborted after its case passed, or skipped it.
        self.assertEqual(found[("aborts_in_repeat", "")]["candidate"], "FAILED")
        self.assertEqual(found[("skips_in_repeat", "test_sometimes_skips")]["candidate"], "skipped")
        for item in found.values():
            self.assertTrue(pathlib.Path(item["log"]).is_file())
        log = pathlib.Path(data["comparison"]["regressions"][0]["log"])
        report = next(p for p in log.parents if p.name == "logs").parent
        for role in ("baseline", "candidate"):
            argv = (report / f"{role}.bazel.log").read_text().splitlines()[0]
            self.assertIn("--runs_per_test=2", argv)

    def test_a_gpu_host_gates_the_cpu_variants_of_torches_that_cannot_use_its_gpus(self):
        """A fake 2-GPU host (nvidia-smi on PATH): the pinned side and a host-mode side whose
        torch is a CPU build both run their CPU variants instead of stopping at the GPU-host
        check (tools/platforms/host_hardware.bzl), and the report says why no GPU variant was
        compared."""
        tmp, _ = self._tmp()
        smi = tmp / "bin" / "nvidia-smi"
        smi.parent.mkdir()
        smi.write_text("#!/bin/sh\nprintf 'NVIDIA H200, 580.159.04\\nNVIDIA H200, 580.159.04\\n'\n")
        smi.chmod(0o755)
        python = _cpu_torch_interpreter()
        path = os.environ["PATH"]
        os.environ["PATH"] = f"{smi.parent}:{path}"
        sides.gpus.cache_clear()
        try:
            code, data, err = self._gate(
                f"{FIXTURES}:skips_in_repeat", extra=[f"--candidate=python:{python}"]
            )
        finally:
            os.environ["PATH"] = path
            sides.gpus.cache_clear()
        self.assertEqual(code, 0, err)
        self.assertEqual(
            data["target_status"][f"{FIXTURES}:skips_in_repeat"]["candidate"], "PASSED"
        )
        self.assertEqual(data["variants"]["compared"], ["cpu"])
        gpu = next(v for v in data["variants"]["not_compared"] if v["variant"] == "gpu")
        self.assertRegex(
            gpu["reason"],
            r"^baseline torch \S+ cannot use this host's 2 GPUs; "
            r"candidate torch \S+ cannot use this host's 2 GPUs$",
        )

    def test_two_saved_runs_are_gated_case_by_case(self):
        tmp, state = self._tmp()
        saved = {}
        for role in ("baseline", "candidate"):
            (state / "role").write_text(role)
            events = tmp / f"{role}.json"
            subprocess.run(
                [
                    str(gate.BAZEL),
                    "test",
                    f"--build_event_json_file={events}",
                    f"--test_env=GATE_FIXTURE_DIR={state}",
                    f"--sandbox_writable_path={state}",
                    "--nocache_test_results",
                    f"{FIXTURES}:param_fails_on_candidate",
                ],
                cwd=gate.ROOT,
                capture_output=True,
            )
            saved[role] = tmp / f"{role}.saved"
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(save_run.main([str(events), str(saved[role])]), 0)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = gate.main(
                [
                    f"--baseline=results:{saved['baseline']}",
                    f"--candidate=results:{saved['candidate']}",
                    f"--out={tmp / 'report'}",
                ]
            )
        self.assertEqual(code, gate.EXIT_REGRESSION, err.getvalue())
        data = json.loads((tmp / "report" / "report.json").read_text())
        (item,) = data["comparison"]["regressions"]
        self.assertEqual(item["case"].split("::")[-1], "test_param[relu inplace]")
        self.assertTrue(item["log"].startswith(str(saved["candidate"])))
        self.assertIn("## Hardware", (tmp / "report" / "report.md").read_text())


if __name__ == "__main__":
    unittest.main()
