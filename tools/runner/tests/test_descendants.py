"""tools/runner/process/descendants.py: a Python process a test starts runs the test process's
checks (site/sitecustomize.py), then the interpreter's own sitecustomize."""

import os
import subprocess
import sys

from tools.runner.process import descendants

WORKSPACE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(descendants.__file__))))
PROBE = "import sys; print('tools.runner.process.descendants' in sys.modules)"


def _started_with(*pythonpath: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    run = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return run.stdout.splitlines()


def test_a_process_started_with_the_site_first_runs_the_checks_then_the_interpreters_own(
    tmp_path,
):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("print('the interpreter sitecustomize ran')\n")
    assert _started_with(descendants.SITE, WORKSPACE, str(theirs)) == [
        "the interpreter sitecustomize ran",
        "True",
    ]


def test_without_the_site_nothing_is_installed():
    assert _started_with(WORKSPACE) == ["False"]


def test_where_the_workspace_is_not_on_the_path_the_site_does_nothing():
    # Another `tools` package, or none: never import something else as the checks.
    assert _started_with(descendants.SITE) == ["False"]


def test_export_puts_the_site_first_for_processes_started_after_it(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "elsewhere")  # restored after the test
    descendants.export()
    assert os.environ["PYTHONPATH"] == descendants.SITE + os.pathsep + "elsewhere"
