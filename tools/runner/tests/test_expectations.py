"""Declared expectations (tools/runner/session/expectations.py), unit by unit; the runner's
end-to-end checks of them are in test_outcomes.py and test_honest_green.py."""

import json

import pytest

from tools.hardware.spec import Spec
from tools.runner.session import expectations, releases


def load(tmp_path, outcome: str, match: str) -> expectations.Entry:
    """The one entry of a file declaring `outcome` with `match` (refused: ExpectationError)."""
    path = tmp_path / "t.expectations.toml"
    path.write_text(
        f'[[expect]]\ntest = "t.py::test_a"\noutcome = "{outcome}"\nreason = "r"\n'
        f"match = {json.dumps(match)}\n"
    )
    (entry,) = expectations.load(str(path), ["cpu"])
    return entry


def test_entries_apply_to_their_torch_releases(monkeypatch):
    entry = expectations.Entry(1, "t.py::test_a", "skip", "r", "m", torch=("2.12", "2.13"))
    anywhere = expectations.Entry(2, "t.py::test_b", "skip", "r", "m")
    for running, applies in (((2, 13), [entry, anywhere]), ((2, 14), [anywhere])):
        monkeypatch.setattr(releases, "torch_release", lambda running=running: running)
        assert expectations.applicable([entry, anywhere], "cpu") == applies


def test_a_fail_matches_from_the_exception_type():
    entry = expectations.Entry(1, "t.py::test_a", "fail", "r", "AssertionError: off by one")
    assert entry.matched("AssertionError: off by one\nassert 1 == 2") == (
        "AssertionError: off by one"
    )
    assert entry.matched("ImportError: off by one") is None
    skip = expectations.Entry(2, "t.py::test_b", "skip", "r", "requires cuda")
    assert skip.matched("test requires cuda, none here") == "requires cuda"
    assert skip.matched("requires nccl") is None


def test_the_failure_text_names_the_qualified_type():
    decode_error = json.JSONDecodeError("Expecting value", "", 0)
    assert expectations.failure_text(decode_error) == (
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    )
    assert expectations.failure_text(AssertionError("Lists differ")) == (
        "AssertionError: Lists differ"
    )

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    text = expectations.failure_text(Unprintable())
    assert text.endswith(".Unprintable: <str() raised RuntimeError>"), text


def test_a_type_bare_or_qualified_is_accepted(tmp_path):
    text = "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    for declared in ("JSONDecodeError", "json.decoder.JSONDecodeError"):
        entry = load(tmp_path, "fail", f"{declared}: Expecting value")
        assert entry.matched(text) == "json.decoder.JSONDecodeError: Expecting value"
    for declared in ("AssertionError", "builtins.AssertionError"):
        entry = load(tmp_path, "fail", f"{declared}: Lists differ")
        assert entry.matched("AssertionError: Lists differ: [1] != [2]") == (
            "AssertionError: Lists differ"
        )


def test_a_type_that_differs_does_not_match(tmp_path):
    text = "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    # A partial qualification, a base class, another type: none is the failure's type.
    for declared in ("decoder.JSONDecodeError", "ValueError", "DecodeError"):
        entry = load(tmp_path, "fail", f"{declared}: Expecting value")
        assert entry.matched(text) is None, declared
        assert entry.mismatch(text) == (
            f"its type is json.decoder.JSONDecodeError, not the entry's {declared} (an entry "
            "names this type as 'JSONDecodeError' or 'json.decoder.JSONDecodeError')"
        )
    entry = load(tmp_path, "fail", "AssertionError: Lists differ")
    assert entry.matched("ImportError: Lists differ") is None


def test_a_fails_message_is_a_literal_prefix(tmp_path):
    entry = load(tmp_path, "fail", "AssertionError: Lists differ")
    assert entry.matched("AssertionError: Lists differ: [1] != [2]") is not None
    assert entry.matched("AssertionError: First: Lists differ") is None  # inside, not its start
    assert entry.matched("AssertionError: lists differ") is None
    assert entry.mismatch("AssertionError: First: Lists differ") == (
        "the failure's message does not start with 'Lists differ': 'First: Lists differ'"
    )


def test_a_type_alone_declares_a_failure_with_no_message_and_nothing_else(tmp_path):
    # torch's bare `assert` in a registry's clear(): the log shows the type and no message.
    for declared in ("AssertionError", "builtins.AssertionError"):
        entry = load(tmp_path, "fail", declared)
        assert entry.matched("AssertionError: ") == "AssertionError"
        assert entry.matched("AssertionError: Lists differ") is None
        assert entry.mismatch("AssertionError: x") == (
            f"the entry declares {declared} with no message, and it has 'x'"
        )
        assert entry.matched("RuntimeError: ") is None
    # A skip's literal has no type: a word alone is still too short.
    with pytest.raises(expectations.ExpectationError, match="fewer than 8 characters"):
        load(tmp_path, "skip", "Skipped")


@pytest.mark.parametrize(
    "outcome, match",
    [
        ("fail", "AssertionError: x"),
        ("fail", "AssertionError: .+"),
        ("fail", "AssertionError: off by  o"),  # seven characters besides whitespace
        ("fail", "AssertionError:          "),
        ("skip", "."),
        ("skip", ""),
        ("skip", "no  gpu"),
    ],
)
def test_a_literal_shorter_than_the_minimum_is_refused(tmp_path, outcome, match):
    with pytest.raises(expectations.ExpectationError, match="fewer than 8 characters"):
        load(tmp_path, outcome, match)


def test_a_literal_of_the_minimum_length_is_accepted(tmp_path):
    assert load(tmp_path, "fail", "AssertionError: off by one").match == (
        "AssertionError: off by one"
    )
    assert load(tmp_path, "skip", "requires").match == "requires"


@pytest.mark.parametrize(
    "match",
    ["off by one since 2.13", "", ".*", "Assertion Error: off by one", "AssertionError:off by one"],
)
def test_a_fail_without_its_type_is_refused_saying_how_to_write_it(tmp_path, match):
    with pytest.raises(expectations.ExpectationError) as refused:
        load(tmp_path, "fail", match)
    assert "a fail's match is literal text `Type: message-prefix`" in str(refused.value)
    assert "`Unsupported`, or qualified, `torch._dynamo.exc.Unsupported`" in str(refused.value)


def test_regular_expression_metacharacters_are_literal(tmp_path):
    alternation = load(tmp_path, "fail", "AssertionError: Lists differ|.")
    assert alternation.matched("ImportError: No module named 'x'") is None
    assert alternation.matched("AssertionError: Lists differ") is None
    assert alternation.matched("AssertionError: Lists differ|. below") is not None
    anything = expectations.Entry(1, "t.py::test_a", "fail", "r", "AssertionError: .+")
    assert anything.matched("AssertionError: boom") is None
    assert anything.matched("AssertionError: .+ in the text") == "AssertionError: .+"
    skip = load(tmp_path, "skip", "requires (cuda|.*)")
    assert skip.matched("requires cuda") is None
    assert skip.matched("it requires (cuda|.*) here") == "requires (cuda|.*)"


def test_a_pattern_counts_the_tests_it_names():
    entry = expectations.Entry(
        1, "t.py::test_a*", "fail", "r", "AssertionError: off by one", count=2
    )
    declared, stale = expectations.assign([entry], ["d/t.py::test_a1", "d/t.py::test_a2"])
    assert sorted(declared) == ["d/t.py::test_a1", "d/t.py::test_a2"] and stale == []
    declared, stale = expectations.assign([entry], ["d/t.py::test_a1"])
    assert stale == [f"{entry}: matches 1 tests, its count says 2: t.py::test_a1"]


def test_a_proposed_entry_is_refused_naming_it_until_confirmed(tmp_path):
    path = tmp_path / "t.expectations.toml"
    entry = (
        '[[expect]]\ntest = "t.py::test_a"\noutcome = "fail"\nreason = "r"\n'
        'match = "AssertionError: off by one"\n'
    )
    path.write_text("[[expect]]\n" + entry.removeprefix("[[expect]]\n") + "proposed = true\n")
    with pytest.raises(expectations.ExpectationError) as refused:
        expectations.load(str(path), ["cpu"])
    assert str(refused.value) == (
        f"{path}: [[expect]] #1: a proposed entry (test = 't.py::test_a', outcome = 'fail', "
        "match = 'AssertionError: off by one'): confirm it by removing proposed = true"
    )
    path.write_text(entry)  # confirmed: the line removed
    (confirmed,) = expectations.load(str(path), ["cpu"])
    assert confirmed.match == "AssertionError: off by one"
    path.write_text(entry + 'proposed = "yes"\n')
    with pytest.raises(expectations.ExpectationError, match="proposed must be true or false"):
        expectations.load(str(path), ["cpu"])


def test_the_session_refuses_a_proposed_entry(tmp_path, monkeypatch):
    # What the plugin does with the file the target names: a UsageError, naming the entry.
    from tools.runner.session import plugin

    path = tmp_path / "t.expectations.toml"
    path.write_text(
        '[[expect]]\ntest = "t.py::test_a"\noutcome = "fail"\nreason = "r"\n'
        'match = "AssertionError: off by one"\nproposed = true\n'
    )
    monkeypatch.setenv(*Spec(expectations=str(path)).env().popitem())
    with pytest.raises(pytest.UsageError, match="a proposed entry .*test = 't.py::test_a'"):
        plugin._outcome_audit()


PASS_ENTRY = '[[expect]]\ntest = "t.py::test_a"\noutcome = "pass"\nreason = "fixed in 2.13"\n'


def test_a_pass_names_no_match_nor_teardown(tmp_path):
    path = tmp_path / "t.expectations.toml"
    path.write_text(PASS_ENTRY + 'torch = ["2.13"]\n')
    (entry,) = expectations.load(str(path), ["cpu"])
    assert (entry.outcome, entry.reason, entry.torch) == ("pass", "fixed in 2.13", ("2.13",))
    for key in ("match", "teardown"):
        path.write_text(PASS_ENTRY + f'{key} = "AssertionError: off by one"\n')
        with pytest.raises(expectations.ExpectationError) as refused:
            expectations.load(str(path), ["cpu"])
        assert str(refused.value) == (
            f"{path}: [[expect]] #1: a pass has no {key}: it declares that a case the source "
            "expects to fail passes here; remove the key"
        )
    path.write_text(PASS_ENTRY.replace('reason = "fixed in 2.13"\n', ""))
    with pytest.raises(expectations.ExpectationError, match="reason is required"):
        expectations.load(str(path), ["cpu"])


def test_a_pass_of_a_case_that_expects_no_failure_is_refused(tmp_path):
    path = tmp_path / "t.expectations.toml"
    path.write_text(PASS_ENTRY)
    entries = expectations.load(str(path), ["cpu"])
    declared, _ = expectations.assign(entries, ["d/t.py::test_a"])
    expectations.check_passes(declared, {"d/t.py::test_a": {"raises": None}})
    with pytest.raises(expectations.ExpectationError) as refused:
        expectations.check_passes(declared, {"d/t.py::test_a": None})
    assert str(refused.value) == (
        f"{path}: [[expect]] #1 (test = 't.py::test_a', outcome = 'pass'): t.py::test_a expects "
        "no failure (no xfail marker, no unittest.expectedFailure), so there is no unexpected "
        "success to declare: remove the entry"
    )


def test_bytes_that_are_not_utf8_are_refused_naming_their_line(tmp_path):
    path = tmp_path / "t.expectations.toml"
    path.write_bytes(PASS_ENTRY.replace("fixed", "fix\xe9d").encode("latin-1"))
    with pytest.raises(expectations.ExpectationError) as refused:
        expectations.load(str(path), ["cpu"])
    assert str(refused.value) == (
        f"{path}: byte 0xe9 on line 4 is not UTF-8: write the file as UTF-8 text"
    )


def test_a_torch_key_without_torch_is_refused_naming_the_entry(tmp_path, monkeypatch):
    def no_torch():
        raise ModuleNotFoundError("No module named 'torch'")

    monkeypatch.setattr(releases, "torch_release", no_torch)
    path = tmp_path / "t.expectations.toml"
    path.write_text(PASS_ENTRY + PASS_ENTRY.replace("test_a", "test_b") + 'torch = ["2.13"]\n')
    with pytest.raises(expectations.ExpectationError) as refused:
        expectations.read(str(path), ["cpu"], "cpu")
    assert str(refused.value) == (
        f"{path}: [[expect]] #2 (test = 't.py::test_b', outcome = 'pass'): torch = ['2.13'] "
        "applies it to torch releases, and this target has no torch: remove the torch key, or "
        "add torch to the target's deps"
    )
    path.write_text(PASS_ENTRY)  # no torch key: no torch needed
    assert [e.test for e in expectations.read(str(path), ["cpu"], "cpu")] == ["t.py::test_a"]


def test_a_file_of_other_values_than_tables_is_refused(tmp_path):
    path = tmp_path / "t.expectations.toml"
    path.write_text('expect = ["t.py::test_a"]\n')
    with pytest.raises(expectations.ExpectationError) as refused:
        expectations.load(str(path), ["cpu"])
    assert str(refused.value) == f"{path}: write each entry as an [[expect]] table"


def test_a_byte_order_mark_is_read_as_utf8(tmp_path):
    # Some editors start a UTF-8 file with one; tomllib refused it as "Invalid statement" at
    # line 1, column 1, a character the reader cannot see.
    path = tmp_path / "t.expectations.toml"
    path.write_bytes(b"\xef\xbb\xbf" + PASS_ENTRY.encode())
    (entry,) = expectations.load(str(path), ["cpu"])
    assert (entry.test, entry.outcome) == ("t.py::test_a", "pass")
    path.write_bytes(b"\xef\xbb\xbf" + PASS_ENTRY.replace("fixed", "fix\xe9d").encode("latin-1"))
    with pytest.raises(expectations.ExpectationError) as refused:
        expectations.load(str(path), ["cpu"])
    assert str(refused.value) == (
        f"{path}: byte 0xe9 on line 4 is not UTF-8: write the file as UTF-8 text"
    )
