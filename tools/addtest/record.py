"""What add_test DIR measured of each file, kept beside the package's BUILD file (RECORD), so
that a re-run measures again only the files whose content changed (by its sha256), and keeps
the others' targets and entries as they were.

One JSON file per package, files by name, one value a line: its diff in a review says what the
measurements changed. `environment` is a digest of @pypi's packages and their versions (a
lock or a host interpreter of other packages measures everything again); per file: its
content's sha256, its cases with their variant and features, what its cpu cases took, the
variants whose cases ran, how many rank processes its widest case ran, and what its target and
entries are written from."""

import dataclasses
import hashlib
import json
import pathlib

from tools.addtest import pack

RECORD = "add_test.measured.json"


@dataclasses.dataclass
class Measured:
    """One collected file, as its target or pack is written from."""

    name: str  # the file's name in its directory
    sha256: str  # of its content when measured
    placed: dict[str, list]  # {case, from the file's name on: [variant, [features]]}
    seconds: float  # what its cpu cases took, every phase
    variants: list[str]  # the variants whose cases ran (cpu first, then the host's GPU ones)
    alone: bool  # it needs a target of its own (stanza.runs_alone)
    args: list[str]  # the pytest arguments its stanza passes (stanza.stanza_args)
    entries: list[dict]  # the expectations entries its measured outcomes propose
    deps: list[str]  # its stanza's deps
    beside: list[str]  # its directory's modules its collection imported (helper candidates)
    fresh: bool = True  # measured in this run, not taken from the record
    ranks: int = 0  # the most rank processes one of its cases ran at once (pack.cpu_tags)

    def costed(self) -> pack.Measured:
        kind = tuple(sorted({(p[0] or "", tuple(p[1])) for p in self.placed.values()}))
        ran = pack.cpu_cases(self.placed)
        return pack.Measured(self.name, self.seconds, ran, len(self.placed), kind, self.alone)


def content_hash(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Part of the key: a record an add_test of another format wrote (one without `ranks`) is
# measured again, not read as files of one process (it is still read for the packs it kept,
# hence `ranks`'s default).
FORMAT = 2


def environment_key(manifest: dict) -> str:
    """A digest of the tests' packages and their versions (@pypi's manifest), and FORMAT."""
    packages = json.dumps(manifest.get("packages"), sort_keys=True) + f"\nformat {FORMAT}"
    return hashlib.sha256(packages.encode()).hexdigest()[:16]


def read(directory: pathlib.Path) -> tuple[str | None, dict[str, Measured]]:
    """The record's environment key and files; (None, {}) where there is none, or one that
    cannot be read (it is written anew)."""
    path = directory / RECORD
    try:
        raw = json.loads(path.read_text())
        files = {
            name: Measured(name=name, fresh=False, **fields)
            for name, fields in raw["files"].items()
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None, {}
    return raw.get("environment"), files


def text(environment: str, files: dict[str, Measured]) -> str:
    fields = {
        name: {k: v for k, v in dataclasses.asdict(m).items() if k not in ("name", "fresh")}
        for name, m in sorted(files.items())
    }
    # Not sort_keys: an entry's keys stay in the order its expectations file lists them.
    return json.dumps({"environment": environment, "files": fields}, indent=1)


def write(directory: pathlib.Path, environment: str, files: dict[str, Measured]) -> bool:
    """Writes the record (removed when no file is left); whether it changed."""
    path = directory / RECORD
    old = path.read_text() if path.is_file() else None
    new = text(environment, files) + "\n" if files else None
    if new == old:
        return False
    if new is None:
        path.unlink()
    else:
        path.write_text(new)
    return True
