"""Declared expectations (test_utils/expectations.py), unit by unit; the runner's end-to-end
checks of them are in tools/runner/tests/test_outcomes.py."""

from test_utils import expectations, releases


def test_entries_apply_to_their_torch_releases(monkeypatch):
    entry = expectations.Entry(1, "t.py::test_a", "skip", "r", torch=("2.12", "2.13"))
    anywhere = expectations.Entry(2, "t.py::test_b", "skip", "r")
    for running, applies in (((2, 13), [entry, anywhere]), ((2, 14), [anywhere])):
        monkeypatch.setattr(releases, "torch_release", lambda running=running: running)
        assert expectations.applicable([entry, anywhere], "cpu") == applies
