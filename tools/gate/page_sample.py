"""A gate's report.json data for the page's tests (tools/gate/test_report_html.py, the browser
check tools/selftest/check_gate_page.py) and its screenshot: every category, a culprit found
by --bisect, and as many cases as asked for.

Modelled on the real gate of 2026-11-25/26 (pinned 2.13.0+cpu against torch==2.15.0,
bench/results/gate_report_2026-11-25_cpu.md, gate_bisect_2026-11-26_cpu.md); the other cases,
and the keys another gate version may add (infra), are made up, so the page is seen whole.
"""

CANDIDATE_PYTHON = "/root/.cache/torch_tests/candidates/torch-2.15.0-c31fa2b90b8d/bin/python"
CANDIDATE_BASE = "/root/.cache/torch_tests/gate/4f71fe12/python-2003a4d03c8e"
HOSTILE_CASE = "<script>alert(1)</script>::test_x[a&b]"  # must stay text on the page


def _reproduce(label: str, node_id: str) -> str:
    return (
        f"TORCH_TEST_PYTHON={CANDIDATE_PYTHON} tools/bazel --output_base={CANDIDATE_BASE} test "
        f"--nocache_test_results '--test_env=TORCH_TEST_NODE_IDS=[\"{node_id}\"]' {label}"
    )


def _log(out: str, label: str, shard: int = 1) -> str:
    path = label.strip("/").replace(":", "/")
    return f"{out}/logs/candidate/{path}/shard_{shard}_run_1_attempt_1/test.log"


def _item(label, case, baseline, candidate, message="", out="/tmp/gate-report", **extra):
    module = label.split(":")[-1]
    node_id = f"{label.strip('/').split(':')[0]}/{module}.py::{case}" if case else None
    return {
        "target": label,
        "case": case,
        "node_id": node_id,
        "baseline": baseline,
        "candidate": candidate,
        "message": message,
        "log": _log(out, label) if candidate != "passed" else None,
        **extra,
    }


def sample(cases: int = 5000, out: str = "/tmp/gate-report") -> dict:
    """report.json's data of a gate over `cases` cases (at least a few hundred)."""
    aot = "//dynamo_tests:test_aot_autograd"
    steps = [["2.13.0+cpu", "passed"], ["2.14.0", "passed"], ["2.14.1", "passed"]]
    regressions = [
        _item(
            aot,
            "AotAutogradFallbackTests::test_aot_sequence_nr",
            "passed",
            "failed",
            "AssertionError: Lists differ: ['Seq[353 chars]aten._unsafe_view.default|linear', "
            "'9|aten.sub[626 chars]or|'] != ['Seq[353 chars]aten.view.default|linear', "
            "'9|aten.sub.Tensor|[618 chars]or|']",
            out,
            confirmation={"verdict": "consistent", "failed_runs": 3, "runs": 3},
            bisect={
                "line": "first changed in 2.15.0 (2.13.0 passed, 2.14.0 passed, 2.14.1 "
                "passed, 2.15.0 failed)",
                "steps": steps + [["2.15.0+cu132", "failed"]],
            },
            rerun_logs=[
                f"{out}/logs/confirm-0/dynamo_tests/test_aot_autograd/"
                f"shard_1_run_{r}_attempt_1/test.log"
                for r in (1, 2)
            ],
        ),
        _item(
            "//dynamo_tests:test_compile_gpu",
            "CompileTests::test_inductor_fused_mm",
            "passed",
            "failed",
            "torch._inductor.exc.InductorError: CppCompileError: C++ compile error",
            out,
            confirmation={"verdict": "consistent", "failed_runs": 3, "runs": 3},
            bisect={
                "line": "first changed in 2.14.1 (2.13.0 passed, 2.14.0 passed, 2.14.1 "
                "failed, 2.15.0 failed)",
                "steps": steps[:2] + [["2.14.1", "failed"], ["2.15.0+cu132", "failed"]],
            },
        ),
        _item(
            aot,
            "AotAutogradFallbackTests::test_aot_grad_mode_mutation",
            "passed",
            "failed",
            "torch._inductor.exc.InductorError: CppCompileError: C++ compile error",
            out,
            confirmation={"verdict": "flaky", "failed_runs": 1, "runs": 3},
            bisect={"line": "not bisected: flaky", "steps": []},
        ),
        _item(
            "//distributed_tests:test_ddp_multi_gpu",
            None,
            "PASSED",
            "TIMEOUT",
            "TIMEOUT: this test was running when it was stopped",
            out,
            stack='File "ddp.py", line 88, in test_allreduce\n    dist.all_reduce(t)',
            confirmation={"verdict": "consistent", "failed_runs": 3, "runs": 3},
        ),
        _item(
            "//tests:test_hostile",
            HOSTILE_CASE,
            "passed",
            "failed",
            "AssertionError: '</pre><b>bold</b>' != \"&amp;\"",
            out,
            confirmation={"verdict": "not confirmed (the case ran in 1 of 2 re-runs)"},
        ),
    ]
    for item in regressions:
        if item["node_id"]:
            item["reproduce"] = _reproduce(item["target"], item["node_id"])
        else:
            item["reproduce"] = (
                f"TORCH_TEST_PYTHON={CANDIDATE_PYTHON} tools/bazel --output_base={CANDIDATE_BASE}"
                f" test --nocache_test_results {item['target']}"
            )
    fixes = [
        _item(
            "//dynamo_tests:test_export", f"ExportTests::test_dynamic_shape_{i}", "failed", "passed"
        )
        for i in range(3)
    ]
    fixes[0]["stale"] = {
        "by": "expectations",
        "outcome": "fail",
        "edit": "in dynamo_tests/expectations.toml, delete [[expect]] #3 "
        "(test = 'ExportTests::test_dynamic_shape_0')",
    }
    infra = [
        _item(
            "//distributed_tests:test_fsdp_gpu_x4",
            f"FSDPTests::test_shard_{i}",
            "passed",
            "failed",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            out,
            side="both",
            cause="cuda_out_of_memory",
            why="CUDA out of memory",
            evidence="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            rule="infra-like on both sides",
        )
        for i in range(2)
    ]
    declared = [
        _item(
            "//dynamo_tests:test_torch_function",
            "TorchFunctionTests::test_subclass_dispatch",
            "xfail",
            "xfail",
            declared="fail: NotImplementedError (expectations.toml, torch = ['2.15'])",
        )
    ]
    one_side = [
        {
            "target": "//dynamo_tests:test_torchrec",
            "case": None,
            "reason": "SKIPPED on one side: needs fbgemm-gpu-cpu, torchrec, missing in "
            f"{CANDIDATE_PYTHON}: no release of torchrec, fbgemm-gpu-cpu loads with this torch",
        },
        _item(
            aot, "AotAutogradTests::test_new_only", None, "passed", reason="new on the candidate"
        ),
    ]
    other_changes = [_item(aot, "AotAutogradTests::test_skip_now", "skipped", "passed")]
    new_cases = [one_side[1]]
    vanished = [
        _item("//dynamo_tests:test_compile", "CompileTests::test_gone[cpu]", "passed", None)
    ]
    # The rest: cases that passed on both sides, spread over targets of several variants.
    targets = {
        aot: 0,
        "//dynamo_tests:test_compile": 0,
        "//dynamo_tests:test_compile_gpu": 0,
        "//dynamo_tests:test_export": 0,
        "//dynamo_tests:test_torch_function": 0,
        "//distributed_tests:test_ddp_multi_gpu": 0,
        "//distributed_tests:test_fsdp_gpu_x4": 0,
        "//tests:test_hostile": 0,
    }
    listed = regressions + fixes + infra + declared + vanished + other_changes
    for item in listed:
        targets[item["target"]] += 1
    labels = sorted(targets)
    spread = max(cases - len(listed), 0)
    for i in range(spread):
        targets[labels[i % len(labels)]] += 1
    compared = sum(targets.values()) - len(infra) - len(vanished)
    status = {
        label: {
            "baseline": "PASSED",
            "candidate": "PASSED"
            if not any(i["target"] == label for i in regressions)
            else "FAILED",
            "baseline_rss": 900,
            "candidate_rss": 950,
            "baseline_cases": n - (label == aot),
            "candidate_cases": n - (label == "//dynamo_tests:test_compile"),
        }
        for label, n in targets.items()
    }
    status["//distributed_tests:test_ddp_multi_gpu"]["candidate"] = "TIMEOUT"
    status["//dynamo_tests:test_torchrec"] = {
        "baseline": "PASSED (cached)",
        "candidate": "SKIPPED",
        "baseline_rss": 400,
        "candidate_rss": None,
    }
    fingerprint = {"python": "3.11.7", "gpus": []}
    return {
        "targets": "//dynamo_tests/... //distributed_tests/... //tests/...",
        "exit_code": 1,
        "thresholds": {"durations": "±25 % and ≥ 2 s", "rss": "±25 % and ≥ 256 MiB"},
        "sides": {
            "baseline": {
                "description": "pinned lock (third_party/python/requirements.lock)",
                "output_base": "/root/.cache/bazel/_bazel_root/4f71fe12d02b312d958b82e3662a73c3",
                "fingerprint": dict(fingerprint, torch="2.13.0+cpu", cuda=None),
                "wall_s": 277.7,
            },
            "candidate": {
                "description": f"interpreter {CANDIDATE_PYTHON}",
                "output_base": CANDIDATE_BASE,
                "fingerprint": dict(fingerprint, torch="2.15.0+cu132", cuda="13.2"),
                "wall_s": 276.7,
            },
        },
        "package_changes": [
            {"package": "torch", "baseline": "2.13.0+cpu", "candidate": "2.15.0"},
            {"package": "triton", "baseline": None, "candidate": "3.9.0"},
        ],
        "variants": {
            "compared": ["cpu", "gpu", "multi_gpu", "gpu_x4"],
            "not_compared": [
                {
                    "variant": "gpu_x8",
                    "reason": "this host has 4 GPUs",
                    "targets": [],
                }
            ],
        },
        "tree_warnings": [],
        "comparison": {
            "regressions": regressions,
            "infra": infra,
            "declared": declared,
            "fixes": fixes,
            "xfail_message_changes": [],
            "other_changes": other_changes,
            "new_cases": new_cases,
            "vanished_cases": vanished,
            "one_side": one_side,
            "skipped_one_side": [
                {
                    "target": "//dynamo_tests:test_torchrec",
                    "baseline": "PASSED",
                    "candidate": "SKIPPED",
                }
            ],
            "skipped_both": [],
            "durations": [{"target": aot, "case": None, "baseline_s": 210.4, "candidate_s": 281.9}],
            "rss": [],
            "coverage": {
                "targets": len(status),
                "targets_compared": len(targets),
                "cases_compared": compared,
            },
        },
        "target_status": status,
        "wall_s": 1767.0,
    }
