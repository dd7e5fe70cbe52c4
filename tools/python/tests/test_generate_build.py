"""tools/python/generate_build.py on a small installed `site/`: how @pypi ships its files.

Pinned mode ships each top-level directory of a distribution as one directory runfile
(generate_build.top_level_dirs says why); host mode, where `site/` holds only the pure-Python
packages supplied from the lock, globs them file by file.
"""

import json
import os
import pathlib
import re
import shutil
import sys

import pytest

from tools.python import generate_build

# glob(PATTERNS, exclude = EXCLUDE) + WHOLE, as site_data writes a py_library's data (twice in
# a select of the remote configs' `:file_by_file` and the default).
DATA = re.compile(r"glob\((\[.*?\]), exclude = (\[.*?\])\) \+ (\[.*?\])")
SELECT = re.compile(r'data = select\(\{":file_by_file": (.*), "//conditions:default": (.*)\}\),')


def install(site: pathlib.Path, name: str, version: str, files: dict, requires=()) -> None:
    """Writes `files` and a dist-info whose RECORD lists them, as pip --target leaves them."""
    info = f"{name}-{version}.dist-info"
    for relative, text in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    (site / info).mkdir(parents=True)
    metadata = [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}"]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    (site / info / "METADATA").write_text("\n".join(metadata) + "\n")
    record = [*files, f"{info}/METADATA", f"{info}/RECORD"]
    (site / info / "RECORD").write_text("".join(f"{r},,\n" for r in record))


@pytest.fixture
def out(tmp_path) -> pathlib.Path:
    site = tmp_path / "pypi" / "site"
    install(
        site,
        "deep",
        "1.0",
        {
            "deep/__init__.py": "",
            "deep/sub/mod.py": "VALUE = 1\n",
            "deep/data/Lorem ipsum.txt": "a name with a space\n",
            "single.py": "",
        },
        requires=["other"],
    )
    install(site, "other", "2.0", {"other/__init__.py": ""})
    return site.parent


def parts(text: str) -> tuple[list, list, list]:
    """(glob patterns, glob excludes, whole directories) of one `data` expression."""
    return tuple(json.loads(part) for part in DATA.fullmatch(text).groups())


def rule(rules: list[str], name: str) -> str:
    (found,) = [r for r in rules if f'name = "{name}"' in r]
    return found


def data(rules: list[str], name: str) -> tuple[list, list, list]:
    """The default `data` of the pinned py_library `name`."""
    return parts(SELECT.search(rule(rules, name)).group(2))


def remote_data(rules: list[str], name: str) -> tuple[list, list, list]:
    """Its `data` under the remote configs (`--define=pypi_runfiles=file_by_file`)."""
    return parts(SELECT.search(rule(rules, name)).group(1))


def pinned(out: pathlib.Path) -> list[str]:
    return generate_build.pinned_libraries(out, ["deep", "other"], set())


def test_pinned_ships_each_top_level_directory_as_one_runfile(out):
    patterns, exclude, whole = data(pinned(out), "deep")
    assert whole == ["site/deep", "site/deep-1.0.dist-info"]
    # Only top-level single files are globbed; nothing under a directory file by file.
    assert patterns == ["site/single.py"]
    assert exclude == []


def test_pinned_remote_configs_get_files_but_for_spaced_names(out):
    # Bazel 4.2.3 stages a directory runfile at the wrong path on a remote worker.
    patterns, exclude, whole = remote_data(pinned(out), "deep")
    assert patterns == ["site/deep/**", "site/deep-1.0.dist-info/**", "site/single.py"]
    assert exclude == ["site/deep/data/**"]
    assert whole == ["site/deep/data"]


def test_pinned_keeps_the_deps_that_decide_what_a_test_can_import(out):
    assert 'deps = [":other"]' in rule(pinned(out), "deep")
    assert data(pinned(out), "other")[2] == ["site/other", "site/other-2.0.dist-info"]


def test_host_mode_globs_file_by_file_but_for_spaced_names(out):
    # What host_libraries passes: only directories holding a name with a space go whole.
    site = out / "site"
    dists = generate_build.site_dists(out)
    rule = generate_build.site_library(out, dists["deep"], dists, generate_build.opaque_dirs(site))
    patterns, exclude, whole = parts(re.search(r"data = (.*),\n", rule).group(1))
    assert patterns == ["site/deep/**", "site/deep-1.0.dist-info/**", "site/single.py"]
    assert exclude == ["site/deep/data/**"]
    assert whole == ["site/deep/data"]


def test_a_directory_shipped_whole_is_keyed_by_its_contents(out, tmp_path):
    # Bazel keys a directory input by its mtime alone: a re-install of the same files must
    # give the same mtime, and a change deep inside a different one.
    again = tmp_path / "again"
    shutil.copytree(out, again, symlinks=True)
    # A fresh install's new mtimes.
    (again / "site" / "deep" / "__init__.py").touch()
    os.utime(again / "site" / "deep" / "data", (1, 1))
    pinned(out)
    pinned(again)

    def stamp(root):
        return os.stat(root / "site" / "deep").st_mtime

    assert stamp(again) == stamp(out)
    # The spaced directory the remote configs ship whole is keyed by its contents too.
    assert os.stat(again / "site/deep/data").st_mtime == os.stat(out / "site/deep/data").st_mtime
    (again / "site" / "deep" / "sub" / "mod.py").write_text("VALUE = 2\n")
    pinned(again)
    assert stamp(again) != stamp(out)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
