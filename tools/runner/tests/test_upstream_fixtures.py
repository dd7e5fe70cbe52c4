"""The upstream-style fixtures that must fail (//upstream_style_tests, tagged manual), run
through the real runner: an undeclared skip and a stale declaration each fail their target,
with a message that names the test.
"""

import pathlib

from tools.runner.tests.runner_subprocess import bazel_env, run_runner

# The runfiles' copy, not the source tree's: pytest looks for an ini file above its arguments,
# and the tree's pyproject.toml is no input of this test (tools/runner/source_view.py).
FIXTURES = pathlib.Path(__file__).absolute().parents[3] / "upstream_style_tests"


def _run(tmp_path, name, expectations=None):
    facts = dict(expectations=expectations and str(expectations))
    result = run_runner(
        FIXTURES / f"{name}.py", bazel_env(tmp_path, facts, CUDA_VISIBLE_DEVICES="")
    )
    return result.returncode, result.stdout + result.stderr


def test_undeclared_skip_fails_its_target(tmp_path):
    code, out = _run(tmp_path, "test_upstream_undeclared_skip")
    assert code == 1, out[-3000:]
    assert "skipped tests fail this target" in out
    assert "TestUndeclaredSkip::test_skipped_silently: hides a problem nobody" in out


def test_stale_declaration_fails_its_target(tmp_path):
    expectations = FIXTURES / "test_upstream_stale_declaration.expectations.toml"
    code, out = _run(tmp_path, "test_upstream_stale_declaration", expectations=expectations)
    assert code == 1, out[-3000:]
    assert "stale" in out.lower()
    assert "TestStaleDeclaration::test_fixed_since" in out
