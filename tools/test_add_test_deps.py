"""tools/add_test.py's deps: what the file's collection loaded, as labels that exist.

One upstream-style fixture per case: reaching common_utils through torch._dynamo.test_case
(torch_testing), torchrec (with the fbgemm-gpu-cpu the lock installs without torchrec's deps),
and a triton import guarded by has_triton() (no dep where it did not run). And what the cases
import only when they run (upstream's get_hf_bert imports transformers inside a test): a dep
when it is there, said when it is not. And the cases run with only the distributions their
target will have, plus what they look for (a presence probe too).
"""

import os
import pathlib
import sys

import pytest

from tools.addtest import collect, deps, environment, measure

FIXTURES = environment.ROOT / "upstream_style_tests"


def _existing(label: str, manifest: dict) -> bool:
    if label.startswith(deps.PYPI):
        return label[len(deps.PYPI) :] in manifest["packages"]
    package = label[2:].partition(":")[0]
    builds = deps.BuildFiles(environment.ROOT)
    return label in builds.libraries(package)


def _found(path: pathlib.Path, run: bool = False) -> deps.Deps:
    env = environment.Environment.of_this_interpreter()
    found = deps.labels_for(
        measure.collect(path, env, run=run), path, environment.ROOT, env.manifest
    )
    assert all(_existing(label, env.manifest) for label in found.labels), found.labels
    return found


def _deps(path: pathlib.Path) -> list[str]:
    return _found(path).labels


def test_reaching_common_utils_through_dynamo_means_torch_testing():
    labels = _deps(FIXTURES / "test_upstream_dynamo_case.py")
    assert "//test_utils:torch_testing" in labels
    assert "@pypi//:functorch" not in labels  # functorch ships inside torch
    assert "@pypi//:torch" not in labels  # torch_testing brings it


def test_torchrec_comes_with_its_locked_requirements():
    labels = _deps(FIXTURES / "test_upstream_torchrec.py")
    assert {"@pypi//:torchrec", "@pypi//:fbgemm-gpu-cpu"} <= set(labels)


def test_a_guarded_import_that_did_not_run_is_no_dep():
    labels = _deps(FIXTURES / "test_upstream_guarded_triton.py")
    assert not [label for label in labels if "triton" in label]


# A test whose body alone imports a small @pypi package that neither pytest, the runner nor
# collection loads (mdurl: markdown-it's URL parser, in the lock as rich's requirement).
_BODY_IMPORT = """
def test_parses_a_url():
    import mdurl

    assert mdurl.parse("https://example.org/x").hostname == "example.org"
"""


def test_a_module_only_a_test_body_imports_is_a_dep(tmp_path):
    path = tmp_path / "test_body_import.py"
    path.write_text(_BODY_IMPORT)
    assert "@pypi//:mdurl" not in _found(path, run=False).labels  # collection alone: not seen
    assert "@pypi//:mdurl" in _found(path, run=True).labels


# The same import in a body only the ranks of torch's MultiProcessTestCase run (spawned
# processes: the test process never imports it).
_RANK_BODY_IMPORT = """
from torch.testing._internal.common_distributed import MultiProcessTestCase


class RankImports(MultiProcessTestCase):
    @property
    def world_size(self):
        return 2

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def test_ranks_parse_a_url(self):
        import mdurl

        assert mdurl.parse("https://example.org/x").hostname == "example.org"
"""


def test_a_module_only_the_ranks_import_is_a_dep(tmp_path):
    path = tmp_path / "test_rank_import.py"
    path.write_text(_RANK_BODY_IMPORT)
    labels = _found(path, run=True).labels
    assert "@pypi//:mdurl" in labels
    assert "@pypi//:packaging" not in labels  # loaded as the case ran, but pytest brings it


def test_a_module_missing_when_a_test_runs_is_said(tmp_path):
    path = tmp_path / "test_missing_import.py"
    path.write_text(_BODY_IMPORT.replace("mdurl", "no_such_module_of_the_lock"))
    notes = _found(path, run=True).notes
    assert any("no_such_module_of_the_lock" in note for note in notes), notes


# A presence probe and a metadata read, neither an import: mdurl and torchrec are in this
# target's runfiles (its deps) but no dep of pytest or the runner, so a file that imports
# nothing has them only if add_test proposes them. Measured in the whole site, the probe
# passed with no dep to show for it and the metadata case failed where its target passes.
_PROBES = """
import importlib.metadata
import importlib.util


def test_the_url_parser_is_installed():
    assert importlib.util.find_spec("mdurl") is not None


def test_torchrec_is_not_installed():
    try:
        importlib.metadata.distribution("torchrec")
    except importlib.metadata.PackageNotFoundError:
        return
    raise AssertionError("torchrec is installed")
"""


def _measured_in_this_targets_site(path, source, monkeypatch):
    """measure.collect's run of `source` written at `path`, in this target's @pypi site (pinned
    mode), and the deps it yields."""
    path.write_text(source)
    this = environment.Environment.of_this_interpreter()
    site = pathlib.Path(os.environ.get("RUNFILES_DIR") or os.environ["TEST_SRCDIR"], "pypi", "site")
    env = environment.Environment(sys.executable, site, this.manifest, "this target's @pypi")
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the child sees the site it is given
    result = measure.collect(path, env, run=True)
    return result, deps.labels_for(result, path, environment.ROOT, env.manifest)


_PINNED_ONLY = pytest.mark.skipif(
    environment.Environment.of_this_interpreter().manifest.get("mode") == "host",
    reason="host mode: a host interpreter's targets see its whole site, as add_test measures",
)


@_PINNED_ONLY
def test_a_file_is_measured_with_what_its_target_will_have(tmp_path, monkeypatch):
    result, found = _measured_in_this_targets_site(
        tmp_path / "test_probes.py", _PROBES, monkeypatch
    )
    assert result["fails"] == []
    assert result["added"] == {"mdurl": ["mdurl"]}
    assert "@pypi//:mdurl" in found.labels
    assert "@pypi//:torchrec" not in found.labels
    assert any("looked for mdurl" in note for note in found.notes), found.notes


# An import only a case makes, of a distribution that needs another (markdown-it-py needs
# mdurl; neither is a dep of pytest or the runner, both are in this target's runfiles). Its
# label brings both; the site measured after it was added held markdown-it-py alone, so the
# case failed there (and the upstream seed's `import transformers` case skipped) where its
# target passes.
_IMPORTS_A_PARSER = """
def test_the_markdown_parser_renders():
    import markdown_it

    assert markdown_it.MarkdownIt().render("*a*") == "<p><em>a</em></p>\\n"
"""


@_PINNED_ONLY
def test_a_dependency_the_cases_import_is_measured_with_what_it_requires(tmp_path, monkeypatch):
    result, found = _measured_in_this_targets_site(
        tmp_path / "test_parser.py", _IMPORTS_A_PARSER, monkeypatch
    )
    assert result["fails"] == []
    assert result["added"] == {"markdown-it-py": ["markdown_it"]}
    assert "@pypi//:markdown-it-py" in found.labels


def test_a_module_whose_file_is_a_bare_name_is_no_repository_file(monkeypatch):
    # torch gives torch.classes and torch.ops bare __file__ names: resolved against the
    # directory add_test runs in (here the repository's root) they looked like its files.
    monkeypatch.chdir(environment.ROOT)
    result = {
        "modules": {"torch._classes": "_classes.py", "torch._ops": "_ops.py"},
        "dists": {},  # no installed file is theirs (tools/addtest/collect.py)
        "requires": {},
    }
    found = deps.labels_for(result, environment.ROOT / "t.py", environment.ROOT, {})
    assert (found.labels, found.notes) == ([], [])


def test_installed_files_resolve_as_realpath_resolves_them(tmp_path):
    # The collector resolves a distribution's files folder by folder (a runfiles tree links
    # each file): its answers must be os.path.realpath's, or no module finds its owner.
    real = tmp_path / "real"
    (real / "pkg").mkdir(parents=True)
    (real / "pkg" / "mod.py").write_text("")
    (real / "other.py").write_text("")
    (real / "pkg" / "up.py").symlink_to("../other.py")  # `..` from inside a linked folder
    farm = tmp_path / "farm"
    (farm / "sub").mkdir(parents=True)
    (farm / "pkg").symlink_to(real / "pkg")
    (farm / "abs.py").symlink_to(real / "pkg" / "mod.py")
    (farm / "sub" / "rel.py").symlink_to("../pkg/mod.py")
    (farm / "chain.py").symlink_to("sub/rel.py")
    (farm / "loop.py").symlink_to("loop.py")
    resolve = collect._real_paths()
    for name in "pkg/mod.py pkg/up.py abs.py sub/rel.py chain.py loop.py gone.py".split():
        assert resolve(farm / name) == os.path.realpath(farm / name), name


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
