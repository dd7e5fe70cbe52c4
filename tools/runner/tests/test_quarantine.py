"""Self-tests of a quarantine (an expectations entry `outcome = "flaky"`): the real runner on
small generated test files. The gate's side (its rate over runs): tools/gate/test_quarantine.py.
"""

import datetime
import os

import pytest

from tools.hardware import envvars, spec
from tools.results import junit
from tools.runner.session import expectations, releases
from tools.runner.tests.runner_subprocess import declare, run_fixture

# Fails as a flaky test does on a bad run (here every run), beside a flaky test on a good one.
FLAKES = """
    def test_flaky():
        assert False, "flaked again: timing window missed"

    def test_lucky():
        pass
    """
QUARANTINE = """
    test = "test_fixture.py::{test}"
    outcome = "flaky"
    reason = "a race in the timing window"
    match = "AssertionError: flaked again"
    issue = "https://example.org/issues/64"
    until = "{until}"
    rate = 0.05
    """


def quarantine(test="test_flaky", until="2999-12-31", **replace) -> str:
    entry = QUARANTINE.format(test=test, until=until)
    for old, new in replace.items():
        entry = entry.replace(old, new)
    return entry


def recorded(result, name):
    (case,) = [c for n, c in result.record.cases.items() if n.endswith(f"::{name}")]
    return case


def test_a_quarantined_failure_is_green_and_recorded_with_its_entry(tmp_path):
    env = declare(tmp_path, quarantine(), quarantine("test_lucky"))
    result = run_fixture(tmp_path, FLAKES, env=env)
    assert result.returncode == 0, result.output
    entry = {"test": "test_fixture.py::test_flaky", "issue": "https://example.org/issues/64"}
    entry.update(entry=1, until="2999-12-31", rate=0.05)
    flaky = recorded(result, "test_flaky")
    assert flaky.outcome == "quarantined"
    assert flaky.detail == (
        "AssertionError: flaked again: timing window missed\nassert False "
        "(quarantined: https://example.org/issues/64)"
    )
    assert flaky.quarantine == entry
    # A pass stays a pass, its entry noted: the gate counts clean runs too.
    lucky = recorded(result, "test_lucky")
    assert (lucky.outcome, lucky.quarantine["entry"]) == ("passed", 2)
    found = {c.name: c.case for c in junit.cases(tmp_path / "test.xml")}
    assert found["test_flaky"].outcome == "quarantined"
    assert found["test_flaky"].declaration == "flaky: a race in the timing window"
    assert found["test_lucky"].outcome == "passed"


def test_an_expired_quarantine_fails_with_its_one_line(tmp_path):
    env = declare(tmp_path, quarantine(until="2020-01-31"))
    result = run_fixture(tmp_path, FLAKES, env=env)
    assert result.returncode == 1, result.output
    line = (
        "quarantine of test_fixture.py::test_flaky expired on 2020-01-31 (issue "
        "https://example.org/issues/64): fix the test or renew the entry"
    )
    assert line in result.output
    flaky = recorded(result, "test_flaky")
    assert (flaky.outcome, flaky.detail) == ("failed", line)


def test_an_expired_quarantine_fails_even_where_the_case_passes(tmp_path):
    env = declare(tmp_path, quarantine("test_lucky", until="2020-01-31"))
    result = run_fixture(tmp_path, FLAKES.replace("assert False", "assert True"), env=env)
    assert result.returncode == 1, result.output
    assert recorded(result, "test_lucky").outcome == "failed"
    assert "quarantine of test_fixture.py::test_lucky expired on 2020-01-31" in result.output


def test_a_dated_quarantine_on_a_cached_target_is_refused(tmp_path):
    # The date is no input of the test action: Bazel would serve the cached result of a run
    # before `until` after it too. A dated quarantine holds only on a target that runs every time.
    result = run_fixture(tmp_path, FLAKES, env=declare(tmp_path, quarantine(), cached=True))
    assert result.returncode != 0, result.output
    path = tmp_path / "test_fixture.expectations.toml"
    line = (
        f"{path}: [[expect]] #1: until '2999-12-31' is a date, and Bazel caches this target's "
        'result, which would outlive it: give the torch_test tags = ["external"] (Bazel then '
        "runs it every time, as a quarantined case must), or end the quarantine at a torch "
        "release"
    )
    assert line in result.record.problems, result.record.problems


def test_the_macro_says_a_target_without_the_external_tag_is_cached():
    # This target has no `external` tag (tools/runner/tests/BUILD.bazel); plain pytest has no
    # spec, and no cache.
    assert spec.spec().cached == (envvars.SPEC in os.environ)


def test_a_failure_its_match_does_not_name_is_red(tmp_path):
    body = FLAKES.replace('assert False, "flaked again: timing window missed"', "{}['gone']")
    result = run_fixture(tmp_path, body, env=declare(tmp_path, quarantine()))
    assert result.returncode == 1, result.output
    flaky = recorded(result, "test_flaky")
    assert flaky.outcome == "failed"
    assert flaky.detail == (
        "KeyError: 'gone' (quarantined: 'AssertionError: flaked again' does not match)"
    )


@pytest.mark.parametrize(
    "replace, line",
    [
        (
            {'issue = "https://example.org/issues/64"\n': ""},
            "a flaky entry needs issue: a non-empty string saying where it is tracked",
        ),
        (
            {"rate = 0.05": "rate = 1.5"},
            "rate must be the failure rate the case was measured at, a number between 0 and 1 "
            "(exclusive), got 1.5",
        ),
        (
            {'until = "2999-12-31"': 'until = "next week"'},
            "until 'next week' is neither a date YYYY-MM-DD nor a torch release key such as "
            "'2.16': write when the quarantine ends",
        ),
        (
            {'match = "AssertionError: flaked again"\n': ""},
            "match is required: literal text that the skip's reason contains, or, for a fail, "
            "`Type: message-prefix`",
        ),
    ],
)
def test_a_malformed_quarantine_is_refused_in_one_line(tmp_path, replace, line):
    result = run_fixture(tmp_path, FLAKES, env=declare(tmp_path, quarantine(**replace)))
    assert result.returncode != 0, result.output
    assert "Traceback" not in result.output, result.output
    # The record holds the one line too: the file's, the entry's, why and the fix.
    path = tmp_path / "test_fixture.expectations.toml"
    assert f"{path}: [[expect]] #1: {line}" in result.record.problems, result.record.problems


def test_every_subtest_of_a_quarantined_case_carries_its_entry(tmp_path):
    # The gate counts a subtest's runs as a case's: its passes as well as its failures.
    body = """
        import unittest

        class T(unittest.TestCase):
            def test_flaky(self):
                for i in range(2):
                    with self.subTest(i=i):
                        assert i == 0, "flaked again: timing window missed"
        """
    env = declare(tmp_path, quarantine("T::test_flaky"))
    result = run_fixture(tmp_path, body, env=env)
    assert result.returncode == 0, result.output
    subs = {n.rsplit(" ", 1)[1]: c for n, c in result.record.cases.items() if " " in n}
    assert {k: c.outcome for k, c in subs.items()} == {"(i=0)": "passed", "(i=1)": "quarantined"}
    assert all(c.quarantine["test"] == "test_fixture.py::T::test_flaky" for c in subs.values())


def flaky_entry(until: str) -> expectations.Entry:
    match = "AssertionError: flaked again"
    return expectations.Entry(1, "t.py::test_a", "flaky", "r", match, issue="#64", until=until)


def test_a_dated_quarantine_holds_through_its_day():
    entry = flaky_entry("2027-03-31")
    assert expectations.expiry(entry, datetime.date(2027, 3, 31)) is None
    assert expectations.expiry(entry, datetime.date(2027, 4, 1)) == (
        "quarantine of t.py::test_a expired on 2027-03-31 (issue #64): fix the test or renew "
        "the entry"
    )


def test_a_quarantine_until_a_release_holds_on_the_releases_before_it(monkeypatch):
    entry = flaky_entry("2.16")
    monkeypatch.setattr(releases, "torch_release", lambda: (2, 15))
    assert expectations.expiry(entry) is None
    monkeypatch.setattr(releases, "torch_release", lambda: (2, 16))
    assert expectations.expiry(entry) == (
        "quarantine of t.py::test_a expired on torch 2.16 (this is 2.16) (issue #64): fix the "
        "test or renew the entry"
    )
