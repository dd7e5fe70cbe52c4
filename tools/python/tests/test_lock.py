"""tools/python/lock.py without the package index: reading, writing and reporting a lock."""

import pathlib
import sys

import pytest

from tools.python import lock

SHA = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


def test_the_pinned_lock_is_in_lock_py_format():
    # The lock is written by lock.render only: reading and rendering it gives its bytes back.
    path = pathlib.Path("third_party/python/requirements.lock")
    assert lock.render(lock.read(path)) == path.read_text()
    assert lock.versions(path)["torch"].startswith("2.")


def test_names_are_canonical_and_versions_as_locked():
    pins = lock.parse(
        f"Typing_Extensions==4.16.0 \\\n    --hash={SHA}\ntorch==2.13.0+cpu --hash={SHA}\n"
    )
    assert {n: p.version for n, p in pins.items()} == {
        "typing-extensions": "4.16.0",
        "torch": "2.13.0+cpu",
    }


@pytest.mark.parametrize(
    "line",
    ["torch>=2.14", f"torch>=2.14 --hash={SHA}", "torch==2.13.0", "torch==2.* --hash=" + SHA],
)
def test_a_line_that_is_no_exact_hashed_pin_is_named(line):
    with pytest.raises(lock.LockError, match="not an exact pin with --hash=sha256: 'torch"):
        lock.parse(line + "\n")


def test_a_name_pinned_twice_is_an_error():
    with pytest.raises(lock.LockError, match="typing-extensions is pinned twice"):
        lock.parse(f"typing_extensions==1 --hash={SHA}\ntyping-extensions==1 --hash={SHA}\n")


def test_changes_name_added_removed_moved_and_rehashed():
    old = lock.parse(f"a==1 --hash={SHA}\nb==1 --hash={SHA}\nc==1 --hash={SHA}\n")
    new = lock.parse(f"a==1 --hash={OTHER}\nb==2 --hash={SHA}\nd==1 --hash={SHA}\n")
    assert lock.changes(old, new) == [
        "~ a 1: other hashes",
        "~ b 1 -> 2",
        "- c 1",
        "+ d 1",
    ]
    assert lock.changes(old, old) == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
