"""Every self-test of the project, by name: what it checks, what it costs, what it needs.

`python3 -m tools.selftest --list` prints this table; `.ci/run` runs it whole (`--all --parallel`).
A check is a command run from the workspace root (a shell script by its path, a Python module,
pytest on a file); it passes when it exits 0. Costs are rough seconds on CI's 2-core CPU host,
as each took in `.ci/run` (its two lanes at once).

`base` says whose Bazel server and output base a check drives (and so its lane under
`--parallel`: workspace and none in one, scratch and own in the other):
  workspace  the workspace's own (they queue behind each other; they share its cache)
  scratch    the harness's scratch copy and its output base (tools/selftest/harness.py), shared
             by those checks and seeded with the workspace's @pypi
  own        output bases of its own (another interpreter, lock or rig: nothing to share)
  none       no Bazel
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    what: str  # one line
    cost_s: int
    needs: tuple[str, ...]
    argv: tuple[str, ...]
    base: str


def _module(name: str) -> tuple[str, ...]:
    return ("python3", "-m", name)


def _bench(name: str, what: str, cost_s: int, needs: tuple, script: str, base="none") -> Check:
    """A bench's smoke run: its smallest real run, its raw output in a folder thrown away."""
    scratch = 'd="$(mktemp -d)" && trap \'rm -rf "$d"\' EXIT && export RESULTS_DIR="$d" && '
    return Check(
        f"bench-{name}", f"smoke: {what}", cost_s, needs, ("bash", "-c", scratch + script), base
    )


# In `--all`'s order. First what needs no Bazel (seconds: a broken tree shows at once), then
# the workspace's server while its analysis is warm from the suite, the gate last there; then
# the rest, the rig's check first (its waits overlap the other lane's work under --parallel),
# the scratch copy's checks together.
CHECKS = (
    Check(
        "docs-paths",
        "every repository path the READMEs and docs/ name exists",
        1,
        (),
        _module("tools.selftest.check_docs_paths"),
        "none",
    ),
    Check(
        "plumbing",
        "tools/hardware/spec.py alone reads a target's spec and its run's runtime record; every "
        "TORCH_TEST_* name the tree uses is defined; Python tools ask tools/bazel for the mode; "
        "the record's outcome words are record.py's",
        2,
        (),
        ("python3", "-m", "pytest", "-q", "-p", "no:cacheprovider")
        + ("tools/hardware/test_plumbing.py", "tools/python/tests/test_host_mode.py")
        + ("tools/results/test_vocabulary.py",),
        "none",
    ),
    Check(
        "lock-keeps-pins",
        "tools/python/update_lock.sh against the index: a lock edit keeps every other pin",
        5,
        ("network",),
        ("python3", "-m", "pytest", "-q", "-p", "no:cacheprovider")
        + ("tools/python/tests/test_lock_compile.py",),
        "none",
    ),
    Check(
        "gate-rates",
        "the gate's rates on a bench with known answers: no consistent regression hidden, "
        "at most 1 % false reds (bench/gate_rates.py, 300 scenarios per kind)",
        1,
        (),
        ("python3", "bench/gate_rates.py", "--cases", "300", "--check"),
        "none",
    ),
    Check(
        "bench-imports",
        "bench/ uses of tools/ only what its modules export (__all__); each bench has a smoke",
        4,
        (),
        ("python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tools/selftest/test_bench.py"),
        "none",
    ),
    _bench(
        "inventory-cost",
        "bench/inventory_cost.sh on a file of seven trivial tests",
        4,
        (),
        "bench/inventory_cost.sh python3 1 tools/selftest/probe_shards.py",
    ),
    _bench(
        "fingerprint-cost",
        "bench/fingerprint_cost.sh on a venv without pip",
        8,
        ("venv",),
        'python3 -m venv --without-pip "$d/v" && bench/fingerprint_cost.sh "$d/v/bin/python3" 1',
    ),
    _bench(
        "runner-cost",
        "bench/runner_cost.py, this checkout against itself on 3 cases",
        10,
        ("host-mode",),
        '"$(tools/bazel host-python)" bench/runner_cost.py --before . --tests 3 --runs 1',
    ),
    _bench(
        "bytecode-cost",
        "bench/bytecode_cost.sh, one run per condition (inductor's ISA check: most of it)",
        220,
        ("host-mode",),
        'bench/bytecode_cost.sh "$(tools/bazel host-python)" 1',
    ),
    _bench(
        "checks-cost",
        "bench/checks_cost.py --smoke: this checkout's own server on one probe target",
        15,
        ("bazel",),
        "python3 bench/checks_cost.py --smoke",
        "workspace",
    ),
    Check(
        "gate-page",
        "the gate's report.html in headless chromium: its DOM counts what report.json holds; "
        "a screenshot",
        20,
        ("chromium",),
        _module("tools.selftest.check_gate_page"),
        "none",
    ),
    Check(
        "macro-errors",
        "contradictory torch_test declarations fail at loading, naming the problem; suites "
        "and --config tag filters select the table's variants",
        25,
        ("bazel",),
        ("tools/selftest/check_macro_errors.sh",),
        "workspace",
    ),
    Check(
        "deps",
        "every test depends on the test_utils modules it imports; no tool on //test_utils",
        15,
        ("bazel",),
        _module("tools.selftest.check_deps"),
        "workspace",
    ),
    Check(
        "shards",
        "Bazel shards partition a target's tests; an unstable collection fails every shard",
        8,
        ("bazel",),
        _module("tools.selftest.check_shards"),
        "workspace",
    ),
    Check(
        "filters",
        "args with spaces reach pytest; run of a sharded target; a new package is in --config=cpu",
        3,
        ("bazel",),
        ("tools/selftest/check_filters.sh",),
        "workspace",
    ),
    _bench(
        "cpu-suite",
        "bench/cpu_suite.py --smoke: its every step on one plain py_test",
        30,
        ("bazel",),
        "python3 bench/cpu_suite.py --smoke",
        "workspace",
    ),
    _bench(
        "scale",
        "bench/scale.py: 2 generated trivial targets, analysis and warm no-op",
        40,
        ("bazel", "host-mode"),
        "python3 bench/scale.py --shape trivial --analysis 2 --noop --no-compare",
        "workspace",
    ),
    _bench(
        "upstream-cost",
        "bench/upstream_cost.sh, one round on an upstream-style fixture",
        60,
        ("bazel", "host-mode"),
        'TORCH_TEST_PYTHON="$(tools/bazel host-python)" bench/upstream_cost.sh '
        "test_upstream_device_type 1",
        "workspace",
    ),
    _bench(
        "host-suite",
        "bench/host_suite.py on the GPU targets of //dynamo_tests, Bazel's run alone",
        240,
        ("bazel", "gpu", "host-mode"),
        "HOST_SUITE_TARGETS=//dynamo_tests:all python3 bench/host_suite.py --tag-filters gpu "
        "--no-pytest --alone 0 --no-warm",
        "workspace",
    ),
    Check(
        "undeclared-reads",
        "a test (its ranks, any subprocess; in Python or C, a stat) sees no undeclared source file",
        140,
        ("bazel",),
        ("tools/selftest/check_undeclared_reads.sh",),
        "workspace",
    ),
    Check(
        "add-test",
        "tools/add_test.py's stanzas, pasted as printed, load and place cases as printed",
        145,
        ("bazel",),
        ("tools/ci/check_add_test.sh",),
        "workspace",
    ),
    Check(
        "gpu-host",
        "a GPU host whose torch cannot use its GPUs stops bazel test, saying how to go on",
        80,
        ("bazel",),
        ("tools/selftest/check_gpu_host.sh",),
        "workspace",
    ),
    Check(
        "stress-short",
        "every distributed CPU target twice at once: failures, port clashes, orphans",
        295,
        ("bazel",),
        ("bench/stress.sh", "short"),
        "workspace",
    ),
    Check(
        "gate-selftest",
        "the upgrade gate through real Bazel on tiny fixtures (FLAKY, TIMEOUT, saved runs, ...)",
        250,
        ("bazel",),
        ("python3", "tools/gate/selftest_bazel.py"),
        "workspace",
    ),
    Check(
        "gate-torch-2.15.0",
        "the upgrade gate: the pinned lock vs torch 2.15.0 over every CPU regression test "
        "(every target outside tools/)",
        550,
        ("bazel", "network", "venv"),
        ("tools/gate/ci_gate.sh",),
        "workspace",  # the baseline side runs on the workspace's output base
    ),
    Check(
        "remote",
        "remote execution and caching against a loopback REAPI rig, faults included",
        385,
        ("bazel", "rig", "network"),
        ("tools/remote/check_remote.sh",),
        "own",
    ),
    Check(
        "cache",
        "an edit (lock, test_utils module, recorded duration) re-runs exactly its dependents; "
        "a target of 5,000 recorded cases starts",
        210,
        ("bazel", "network"),
        _module("tools.selftest.check_cache"),
        "scratch",
    ),
    Check(
        "bad-lock",
        "a broken lock fails @pypi's fetch with pip's reason",
        80,
        ("bazel", "network"),
        _module("tools.selftest.check_bad_lock"),
        "scratch",
    ),
    Check(
        "refetch",
        "a failed or interrupted re-fetch of @pypi keeps every cached result",
        135,
        ("bazel", "network"),
        _module("tools.selftest.check_refetch"),
        "scratch",
    ),
    Check(
        "host-setup",
        "tools/bazel setup sets the host mode once per checkout; TORCH_TEST_PYTHON overrides it",
        85,
        ("bazel", "network", "venv"),
        _module("tools.selftest.check_host_setup"),
        "scratch",
    ),
    _bench(
        "upstream-dir",
        "bench/upstream_dir.py on a folder of one trivial file",
        150,
        ("bazel", "host-mode"),
        'mkdir "$d/tiny" && printf \'def test_one():\\n    pass\\n\' >"$d/tiny/test_tiny.py" && '
        '"$(tools/bazel host-python)" -m venv --without-pip --system-site-packages "$d/v" && '
        'TORCH_TEST_PYTHON="$d/v/bin/python3" python3 bench/upstream_dir.py "$d/tiny" '
        '--venv "$d/v" --scratch "$d/scratch" --out "$d/report.md"; s=$?; '
        '(cd "$d/scratch" && tools/bazel shutdown); exit $s',
        "own",
    ),
    Check(
        "pinned-interpreter",
        "pinned mode re-runs tests when the interpreter's stdlib changes",
        15,
        ("bazel", "network"),
        ("tools/selftest/check_pinned_interpreter.sh",),
        "own",
    ),
    Check(
        "host-mode",
        "TORCH_TEST_PYTHON: tests on the image's packages, missing ones from the lock or "
        "SKIPPED; a changed image re-runs them",
        335,
        ("bazel", "network", "venv"),
        ("tools/selftest/check_host_mode.sh",),
        "own",
    ),
    Check(
        "host-fingerprint",
        "host mode keys results on the environment's files (patched, added, touch -r, editable)",
        35,
        ("bazel", "network", "venv"),
        ("tools/selftest/check_host_fingerprint.sh",),
        "own",
    ),
    Check(
        "bytecode-poison",
        "a test that forges torch's bytecode cannot change what a later target imports",
        100,
        ("bazel", "network", "venv"),
        ("tools/selftest/check_bytecode_poison.sh",),
        "own",
    ),
    Check(
        "accelerators",
        "on a GPU host: a cpu target's torch sees no GPU, a gpu target's sees its lease",
        60,
        ("bazel", "gpu"),
        ("tools/selftest/check_accelerators.sh",),
        "own",
    ),
)

BY_NAME = {check.name: check for check in CHECKS}
