"""add_test DIR packs cheap files into shared targets by their measured cost
(tools/addtest/pack.py): cheap files share a target, an expensive one runs alone, files of
other variants are never packed together, and a re-run keeps a pack a person owns."""

import pathlib
import tomllib

from tools.addtest import directory_mode, pack, stanza
from tools.addtest.pack import Measured

CPU = ((("cpu", ()),),)
WITH_GPU = ((("cpu", ()), ("gpu", ())),)
LIMIT = pack.alone_at()


def cheap(name, kind=CPU):
    return Measured(name, LIMIT / 10, ran=5, cases=5, kind=kind)


def test_cheap_files_share_a_target_and_an_expensive_one_runs_alone():
    files = [cheap("test_a.py"), cheap("test_b.py"), Measured("test_big.py", LIMIT, 3, 3, CPU)]
    assert pack.plan(files) == [["test_a.py", "test_b.py"], ["test_big.py"]]


def test_a_pack_is_filled_up_to_a_lone_files_cost():
    files = [cheap(f"test_{i:02}.py") for i in range(25)]  # each a tenth of the limit
    groups = pack.plan(files)
    assert [len(g) for g in groups] == [10, 10, 5]


def test_files_of_other_variants_are_not_packed_together():
    files = [cheap("test_a.py"), cheap("test_g1.py", WITH_GPU), cheap("test_b.py")]
    files.append(cheap("test_g2.py", WITH_GPU))
    groups = pack.plan(files)
    assert groups == [["test_a.py", "test_b.py"], ["test_g1.py", "test_g2.py"]]


def test_a_file_whose_run_crashed_runs_alone():
    # pytest's INTERNALERROR ends the process: in a pack, the other files' cases never run.
    crashed = Measured("test_c.py", LIMIT / 10, 5, 5, CPU, alone=True)
    assert pack.plan([cheap("test_a.py"), crashed, cheap("test_d.py")]) == [
        ["test_a.py", "test_d.py"],
        ["test_c.py"],
    ]


def test_a_run_that_selected_nothing_ended_normally():
    # A file whose cases are all a GPU variant's selects none in the cpu run: pytest exits 5
    # (no tests ran), no crash, so the file packs as any other and no note says otherwise.
    gpu_only = result(0.0, 1, variant="gpu") | {"exit": 5}
    assert stanza.crash_notes(gpu_only) == []
    assert not stanza.runs_alone(gpu_only)


def test_cases_that_did_not_run_here_count_by_their_number():
    # One cpu case measured of 20 (the rest are GPU cases): its cost is scaled to all 20.
    gpu_heavy = Measured("test_g.py", LIMIT / 10, ran=1, cases=20, kind=WITH_GPU)
    assert gpu_heavy.cost >= LIMIT
    assert pack.plan([gpu_heavy, cheap("test_h.py", WITH_GPU)]) == [
        ["test_g.py"],
        ["test_h.py"],
    ]


def test_owned_groups_are_kept_as_they_are():
    files = [cheap("test_a.py"), cheap("test_b.py"), cheap("test_c.py")]
    assert pack.plan(files, fixed=[["test_b.py"]]) == [
        ["test_a.py", "test_c.py"],
        ["test_b.py"],
    ]


# ---- written: BUILD.bazel and the pack's expectations file, from measured results


class Env:
    manifest = {"dists": {}}


def result(seconds, cases, variant="cpu", fails=(), file="x.py"):
    placed = {f"{file}::T::test_{i}": [variant, []] for i in range(cases)}
    return {
        "placed": placed,
        "modules": {},
        "dists": {},
        "requires": {},
        "errors": [],
        "torch": "2.13.0",
        "seconds": seconds,
        "skips": [],
        "xfails": [],
        "xpassed": [],
        "fails": list(fails),
    }


def _fail(test, file="x.py"):
    return [f"{file}::T::{test}", {"type": "ValueError", "msg": "the widget count is wrong"}, None]


def _write(directory: pathlib.Path, results: dict[str, dict]):
    for name in results:
        (directory / name).write_text("def test_0():\n    pass\n")
    by_path = {directory / name: r for name, r in results.items()}
    return directory_mode.write(directory, by_path, Env(), ran=True)


def test_a_directory_packs_cheap_files_and_their_expectations(tmp_path):
    said, status = _write(
        tmp_path,
        {
            "test_a.py": result(0.1, 3, fails=[_fail("test_0")]),
            "test_b.py": result(0.1, 2),
            "test_big.py": result(LIMIT * 2, 2),
        },
    )
    assert status == 0, said
    build = (tmp_path / "BUILD.bazel").read_text()
    packed = build[build.index('name = "packed_test_a"') :].split(")")[0]
    assert '"test_a.py",' in packed and '"test_b.py",' in packed, build
    assert 'expectations = "packed_test_a.expectations.toml"' in packed
    assert 'name = "test_big",' in build and 'name = "test_a",' not in build
    entries = tomllib.loads((tmp_path / "packed_test_a.expectations.toml").read_text())
    assert [e["test"] for e in entries["expect"]] == ["test_a.py::T::test_0"]
    assert not (tmp_path / "test_a.expectations.toml").exists()


def test_a_rerun_keeps_a_pack_whose_proposal_a_person_confirmed(tmp_path):
    results = {"test_a.py": result(0.1, 3, fails=[_fail("test_0")]), "test_b.py": result(0.1, 2)}
    _write(tmp_path, results)
    toml = tmp_path / "packed_test_a.expectations.toml"
    toml.write_text(toml.read_text().replace("proposed = true\n", ""))  # confirmed
    # test_a is measured expensive now: unowned, it would run alone; confirmed, the pack stays.
    results["test_a.py"]["seconds"] = LIMIT * 3
    said, _ = _write(tmp_path, results)
    build = (tmp_path / "BUILD.bazel").read_text()
    assert 'name = "packed_test_a"' in build and 'name = "test_a",' not in build, said
    assert "proposed" not in toml.read_text()


def test_a_target_gets_the_size_its_measured_cost_needs():
    # A 4-rank DTensor file measured at 447 s timed out at the default size's 300 s.
    assert pack.size_for(40.0) is None  # torch_test's default, medium
    assert pack.size_for(150.0) is None  # twice it still within medium's 300 s
    assert pack.size_for(151.0) == "large"
    assert pack.size_for(447.3) == "large"
    assert pack.size_for(451.0) == "enormous"
    assert pack.size_for(5000.0) == "enormous"  # the largest there is: shard it beside


def test_the_stanza_names_the_size_and_add_test_says_why():
    placed = {"test_t.py::test_a": ["cpu", []]}
    text = stanza.stanza(pathlib.Path("test_t.py"), placed, ["@pypi//:torch"], size="large")
    assert '    size = "large",' in text.splitlines()
    assert "size" not in stanza.stanza(pathlib.Path("test_t.py"), placed, ["@pypi//:torch"])
    said = pack.size_line("large", 447.3)
    assert said.startswith('size = "large": its cases took 447 s') and "300 s" in said, said


def test_a_directory_writes_the_size_of_its_slow_file_and_says_so(tmp_path):
    said, status = _write(tmp_path, {"test_slow.py": result(447.3, 2), "test_a.py": result(0.1, 2)})
    assert status == 0, said
    build = (tmp_path / "BUILD.bazel").read_text()
    slow = build[build.index('name = "test_slow"') :].split(")")[0]
    assert 'size = "large",' in slow, build
    assert build.count("size =") == 1, build
    assert any(line.startswith('test_slow: size = "large"') for line in said), said


def test_a_pack_whose_case_reads_otherwise_in_one_process_is_not_packed(tmp_path):
    # The pack's run (its files in one process) fails a case that passed alone: a file before
    # it left state in the process. Its files get targets of their own, and add_test says so.
    results = {"test_a.py": result(0.1, 2), "test_b.py": result(0.1, 2)}
    seen = []

    def together(paths, labels, requires):
        seen.append([p.name for p in paths])
        return result(0.2, 2, fails=[_fail("test_1")])

    for name in results:
        (tmp_path / name).write_text("def test_0():\n    pass\n")
    by_path = {tmp_path / name: r for name, r in results.items()}
    said, status = directory_mode.write(tmp_path, by_path, Env(), ran=True, together=together)
    assert status == 0 and seen == [["test_a.py", "test_b.py"]], said
    build = (tmp_path / "BUILD.bazel").read_text()
    assert 'name = "test_a",' in build and 'name = "test_b",' in build, build
    assert "packed_" not in build, build
    (line,) = [line for line in said if "NOT PACKED" in line]
    assert "x.py::T::test_1: failed ValueError the widget count is wrong; alone: passed" in line


def test_a_pack_whose_cases_read_as_alone_stays_a_pack(tmp_path):
    fail = _fail("test_0", "a.py")
    results = {"test_a.py": result(0.1, 2, fails=[fail], file="a.py")}
    results["test_b.py"] = result(0.1, 2, file="b.py")
    for name in results:
        (tmp_path / name).write_text("def test_0():\n    pass\n")
    by_path = {tmp_path / name: r for name, r in results.items()}

    def together(paths, labels, requires):  # the same cases, the same outcomes
        both = result(0.2, 2, fails=[fail], file="a.py")
        both["placed"] |= results["test_b.py"]["placed"]
        return both

    said, _ = directory_mode.write(tmp_path, by_path, Env(), ran=True, together=together)
    assert 'name = "packed_test_a"' in (tmp_path / "BUILD.bazel").read_text(), said
    assert not any("NOT PACKED" in line for line in said), said


def test_a_case_that_timed_out_beside_other_files_is_measured_again_alone(monkeypatch):
    # A 4-rank DTensor case, measured 2 files at a time on 2 cores, passed torch's 300 s
    # timeout (proposed as a failure); alone it passes, and so does its target.
    timeout = {
        "type": "RuntimeError",
        "msg": "Process 0 terminated or timed out after 300.05 seconds",
    }
    runs = {"test_a.py": [result(0.1, 1)], "test_slow.py": []}
    runs["test_slow.py"] = [
        result(300, 2, fails=[["x.py::T::test_1", timeout, None]]),
        result(250, 2),
    ]
    calls = []

    def collect(path, env, run):
        calls.append(path.name)
        return runs[path.name].pop(0)

    monkeypatch.setattr(directory_mode.measuring, "collect", collect)
    files = [pathlib.Path("test_a.py"), pathlib.Path("test_slow.py")]
    results = directory_mode.measure(files, Env(), True, 2, 0)
    slow = results[pathlib.Path("test_slow.py")]
    assert slow["fails"] == [] and slow["alone_after"] == ["x.py::T::test_1"], slow
    assert sorted(calls) == ["test_a.py", "test_slow.py", "test_slow.py"]
    assert calls[-1] == "test_slow.py"  # after the others, nothing beside it


def test_the_timeout_of_a_file_measured_alone_is_what_it_measured(monkeypatch):
    timeout = {
        "type": "RuntimeError",
        "msg": "Process 0 terminated or timed out after 300.05 seconds",
    }
    failed = result(300, 2, fails=[["x.py::T::test_1", timeout, None]])
    monkeypatch.setattr(directory_mode.measuring, "collect", lambda path, env, run: failed)
    results = directory_mode.measure([pathlib.Path("test_slow.py")], Env(), True, 1, 0)
    assert results[pathlib.Path("test_slow.py")]["fails"] == failed["fails"]
