"""Declared expectations (tools/runner/session/expectations.py), unit by unit; the runner's
end-to-end checks of them are in test_outcomes.py and test_honest_green.py."""

from tools.runner.session import expectations, releases


def test_entries_apply_to_their_torch_releases(monkeypatch):
    entry = expectations.Entry(1, "t.py::test_a", "skip", "r", "m", torch=("2.12", "2.13"))
    anywhere = expectations.Entry(2, "t.py::test_b", "skip", "r", "m")
    for running, applies in (((2, 13), [entry, anywhere]), ((2, 14), [anywhere])):
        monkeypatch.setattr(releases, "torch_release", lambda running=running: running)
        assert expectations.applicable([entry, anywhere], "cpu") == applies


def test_a_fail_matches_from_the_exception_type():
    entry = expectations.Entry(1, "t.py::test_a", "fail", "r", "AssertionError: off by")
    assert entry.matched("AssertionError: off by one") == "AssertionError: off by"
    assert entry.matched("ImportError: off by one") is None
    skip = expectations.Entry(2, "t.py::test_b", "skip", "r", "cuda")
    assert skip.matched("requires cuda") == "cuda"


def test_a_pattern_counts_the_tests_it_names():
    entry = expectations.Entry(1, "t.py::test_a*", "fail", "r", "AssertionError: x", count=2)
    declared, stale = expectations.assign([entry], ["d/t.py::test_a1", "d/t.py::test_a2"])
    assert sorted(declared) == ["d/t.py::test_a1", "d/t.py::test_a2"] and stale == []
    declared, stale = expectations.assign([entry], ["d/t.py::test_a1"])
    assert stale == [f"{entry}: matches 1 tests, its count says 2: t.py::test_a1"]
