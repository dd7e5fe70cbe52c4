"""Shards partition one stable collection (tools/runner/collection.py), through the real runner.

A set's order follows the process's string hash seed, so pytest's positional ids over it
(`case0`, ...) name different cases in different processes: shards could run one case twice
and another never.
"""

import gc
import importlib.util
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tools.runner import collection
from tools.runner.session import child, collection_record
from tools.runner.tests.runner_subprocess import bazel_env, run_runner, write_tests

# The example: parameters pytest cannot print, over a set; gelu fails.
OVER_A_SET = """
import pytest

@pytest.mark.parametrize(
    "case", {("relu", "float32"), ("gelu", "float16"), ("tanh", "bfloat16")}
)
def test_activation(case):
    assert case[0] != "gelu"
"""
OVER_A_LIST = OVER_A_SET.replace("{(", "[(").replace(")}", ")]").replace('!= "gelu"', "")
SEED = """
import os

def test_seed():
    assert os.environ.get("PYTHONHASHSEED") == {want!r}
"""


def cases(path) -> list[str]:
    return [c.get("name") for c in ET.parse(path).getroot().iter("testcase")]


@pytest.mark.parametrize("user, want", [(None, "0"), ("7", "7")])
def test_hash_seed_is_fixed_unless_the_user_sets_one(tmp_path, user, want):
    extra = {"PYTHONHASHSEED": user} if user else {}
    env = bazel_env(tmp_path, **extra)
    if not user:
        env.pop("PYTHONHASHSEED", None)
    result = run_runner(write_tests(tmp_path, SEED.format(want=want)), env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_example_set_orders_differ_between_the_two_seeds():
    # Guards the next test's premise: with seeds 0 and 1 the set's order differs.
    script = 'print(list({("relu", "float32"), ("gelu", "float16"), ("tanh", "bfloat16")}))'
    orders = {
        seed: subprocess.run(
            [sys.executable, "-c", script],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("0", "1")
    }
    assert orders["0"] != orders["1"]


@pytest.mark.parametrize("index", [0, 1])
def test_positional_ids_over_a_set_fail_every_shard_naming_them(tmp_path, index):
    env = bazel_env(tmp_path, TEST_TOTAL_SHARDS=2, TEST_SHARD_INDEX=index)
    result = run_runner(write_tests(tmp_path, OVER_A_SET), env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "collection differs between two processes" in result.stderr, result.stderr
    assert "test_fixture.py::test_activation[case0] is {'case':" in result.stderr


def test_a_stable_collection_is_partitioned(tmp_path):
    test_file = write_tests(tmp_path, OVER_A_LIST)
    seen = []
    for index in range(2):
        env = bazel_env(tmp_path, TEST_TOTAL_SHARDS=2, TEST_SHARD_INDEX=index)
        result = run_runner(test_file, env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "collection differs" not in result.stderr
        seen += cases(tmp_path / "test.xml")
    assert sorted(seen) == [f"test_activation[case{i}]" for i in range(3)]


# A conftest that defines a case in shard 1's processes only (it reads its shard's index).
ONE_SHARDS_CASE = """
import os

import pytest


def pytest_generate_tests(metafunc):
    if "only" in metafunc.fixturenames:
        only = ["here"] if os.environ.get("TEST_SHARD_INDEX") == "1" else []
        metafunc.parametrize("only", only)
"""


def test_a_case_one_shard_alone_defines_fails_that_shard(tmp_path):
    # Shard 1 would give test_only[here] to shard 0, which never collects it: each shard must
    # split the one collection the inventory (no shard's index in its environment) holds.
    (tmp_path / "conftest.py").write_text(ONE_SHARDS_CASE)
    body = "def test_a():\n    pass\n\ndef test_b():\n    pass\n\ndef test_only(only):\n    pass\n"
    test_file = write_tests(tmp_path, body)
    env = bazel_env(tmp_path, TEST_TOTAL_SHARDS=2, TEST_SHARD_INDEX=1)
    result = run_runner(test_file, env)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if "only with this shard's seed:" in line]
    assert lines and lines[0].endswith("/test_fixture.py::test_only[here]"), result.stderr


def test_differences_name_missing_and_changed_ids():
    ours = {"a[x0]": {"x": "1"}, "b": {}}
    theirs = {"a[x0]": {"x": "2"}, "c": {}}
    assert collection.differences(ours, theirs) == [
        "only with this shard's seed: b",
        "only with the other seed: c",
        "a[x0] is {'x': '1'} here, {'x': '2'} with the other seed",
    ]


def test_addresses_do_not_count_as_differences():
    class Opaque:
        pass

    a, b = Opaque(), Opaque()
    assert collection_record._stable_repr(a) == collection_record._stable_repr(b)


def test_the_record_is_taken_before_any_selection(tmp_path):
    # Variant, -k and shard selection are deterministic functions of the ids; the record must
    # hold every collected id, whatever order plugins select in.
    test_file = write_tests(tmp_path, "def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    out = tmp_path / "record.json"
    code = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys, types, pytest; from tools.runner.session import ledger; "
            "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT); "
            "shards = types.SimpleNamespace(total=2, elsewhere=[]); "
            "pytest.main(sys.argv[2:], plugins=[ledger.plugin(fd, shards)])",
            str(out),
            str(test_file),
            "-k",
            "test_a",
            "-p",
            "no:cacheprovider",
        ],
        env=bazel_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    line = out.read_text().splitlines()[0]  # the ledger's first line: `collection JSON`
    assert line.startswith("collection "), code.stdout + code.stderr
    assert sorted(json.loads(line.partition(" ")[2])) == [  # case keys: the file's path, the id
        f"{test_file}::test_a",
        f"{test_file}::test_b",
    ], code.stdout + code.stderr


def test_the_inventory_imports_with_one_thread_whatever_the_tests_get(tmp_path):
    # It runs no test: a thread per core only spins while torch imports (bench/scale.py
    # --breakdown). The test process keeps its own budget. No shard's index reaches it: every
    # shard's inventory is one collection.
    shows_env = [
        sys.executable,
        "-c",
        "import json, os, sys; json.dump({'threads': os.environ.get('OMP_NUM_THREADS'),"
        " 'seed': os.environ.get('PYTHONHASHSEED'), 'shard': os.environ.get('TEST_SHARD_INDEX')},"
        " os.fdopen(int(sys.argv[1]), 'w'))",
    ]
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "16", "PYTHONHASHSEED": "0"}
    env.update(TEST_SHARD_INDEX="1", TEST_TOTAL_SHARDS="2")
    check = collection.Check(shows_env, [], env, str(tmp_path))
    check.proc.wait()
    seen = json.loads(check.out.text())  # what it wrote to the runner's stream
    assert seen == {"threads": "1", "seed": "1", "shard": None}
    assert env["OMP_NUM_THREADS"] == "16", "the tests' environment is not changed"


RECORDS_ITS_PROCESS = """
    import json, os, sys

    record = {{"pid": os.getpid(), "ppid": os.getppid(), "tmp": os.environ["TMPDIR"],
              "torch_loaded": "torch" in sys.modules}}
    with open(os.path.join({folder!r}, f"{{os.getpid()}}.json"), "w") as f:
        json.dump(record, f)

    def test_a():
        try:  # a source that imports torch: the test process preloads it, where there is one
            import torch  # noqa: F401
        except ImportError:
            pass
    """


def test_an_unsharded_targets_inventory_is_forked_after_one_torch_import(tmp_path):
    """The test process imports torch once, then forks the inventory before it loads anything
    of the target's: both import the source with torch already there, the inventory as the
    test process's child, with a TMPDIR of its own."""
    folder = tmp_path / "imports"
    folder.mkdir()
    test_file = write_tests(tmp_path, RECORDS_ITS_PROCESS.format(folder=str(folder)))
    result = run_runner(test_file, bazel_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    seen = [json.loads(p.read_text()) for p in folder.iterdir()]
    assert len(seen) == 2, seen
    by_pid = {r["pid"]: r for r in seen}
    forked = [r for r in seen if r["ppid"] in by_pid]
    assert len(forked) == 1, seen  # the inventory, the test process's child
    inventory, session = forked[0], by_pid[forked[0]["ppid"]]
    # Imported before the module, once, where this interpreter has torch (a target without
    # @pypi//:torch has none: then neither process imports it).
    has_torch = importlib.util.find_spec("torch") is not None
    assert session["torch_loaded"] == inventory["torch_loaded"] == has_torch, seen
    assert inventory["tmp"] != session["tmp"], seen


FREES_ITS_CYCLES = """
    import gc, json, sys, weakref

    try:
        import torch  # noqa: F401
    except ImportError:
        pass


    class Node:
        pass


    def cycle():
        node = Node()
        node.self = node  # only the cyclic collector frees it
        return weakref.ref(node)


    AT_IMPORT = cycle()


    def test_cycles():
        in_test = cycle()
        gc.collect()
        record = {{"frozen": gc.get_freeze_count(), "torch": "torch" in sys.modules,
                  "collecting": gc.isenabled(), "thresholds": gc.get_threshold(),
                  "at_import_freed": AT_IMPORT() is None, "in_test_freed": in_test() is None}}
        with open({path!r}, "w") as f:
            json.dump(record, f)
    """


def test_what_torchs_preload_built_is_frozen_and_nothing_of_the_tests(tmp_path):
    """The test process freezes what importing torch built (the cyclic collector skips it from
    then on), before anything of the target's runs: a cycle the test module or a test makes is
    still freed."""
    path = tmp_path / "seen.json"
    test_file = write_tests(tmp_path, FREES_ITS_CYCLES.format(path=str(path)))
    result = run_runner(test_file, bazel_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    seen = json.loads(path.read_text())
    assert seen["at_import_freed"] and seen["in_test_freed"], seen
    # The collector, paused while the preload imports, runs as it would for the tests.
    assert seen["collecting"] and seen["thresholds"] == list(gc.get_threshold()), seen
    if importlib.util.find_spec("torch") is None:
        assert seen == {**seen, "torch": False, "frozen": 0}, seen
    else:
        # torch's import tracks some 10^5 objects; pytest's and the runner's are frozen with them.
        assert seen["torch"] and seen["frozen"] > 50_000, seen


def test_only_sources_that_load_torch_make_the_test_process_preload_it(tmp_path):
    """Preloading torch saves the inventory's second import of it only where the target's own
    import loads torch; for a source that imports the torch-free markers alone it is an
    import the target would not make (seconds of a core)."""

    def loads(source: str) -> bool:
        path = tmp_path / "test_x.py"
        path.write_text(source)
        return child._imports_torch([str(path)])

    assert loads("import torch\n")
    assert loads("from torch.testing._internal import common_utils\n")
    assert loads("def f():\n    from test_utils.dynamo import CompileCounter\n")
    assert loads("from test_utils import hardware, versions\n")  # versions imports torch
    assert not loads("from test_utils.hardware import requires_gpus\n")
    assert not loads("from test_utils import hardware\nimport test_utils.hardware\n")
    assert not loads("import json\nfrom . import torch\n")  # a relative import is the package's
