"""Regenerates tools/test_times.json (per-test seconds, by target) from bazel-testlogs.

    tools/bazel test //... && python3 tools/update_test_times.py [TESTLOGS_DIR...]

TESTLOGS_DIR defaults to bazel-testlogs; pass e.g. an unpacked copy from a GPU host too.
The runner packs shards longest-first from this file (tools/runner/sharding.py); tests missing
from it are dealt round-robin. Only targets found in bazel-testlogs are updated; others keep
their recorded times. Node ids are pytest's, relative to the workspace root.
"""

import json
import pathlib
import sys
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parent.parent
TIMES = ROOT / "tools" / "test_times.json"


def label_of(xml_path: pathlib.Path, testlogs: pathlib.Path) -> str:
    parts = xml_path.relative_to(testlogs).parts[:-1]
    if parts[-1].startswith("shard_"):
        parts = parts[:-1]
    return f"//{'/'.join(parts[:-1])}:{parts[-1]}"


def node_id(case: ET.Element) -> str:
    file = case.get("file", "")
    module = file.removesuffix(".py").replace("/", ".")
    classname = case.get("classname", "")
    cls = classname[len(module) + 1 :] if classname.startswith(module + ".") else ""
    return "::".join(p for p in (file, cls, case.get("name", "")) if p)


def collect(testlogs: pathlib.Path) -> dict[str, dict[str, float]]:
    times: dict[str, dict[str, float]] = {}
    for xml_path in sorted(testlogs.rglob("test.xml")):
        target = times.setdefault(label_of(xml_path, testlogs), {})
        for case in ET.parse(xml_path).getroot().iter("testcase"):
            if (ROOT / case.get("file", "")).is_file():  # skip logs of deleted sources
                target[node_id(case)] = round(float(case.get("time", 0)), 2)
    return times


def main(dirs: list[str]) -> int:
    fresh = {}
    for testlogs in [pathlib.Path(d).resolve() for d in dirs or [ROOT / "bazel-testlogs"]]:
        if not testlogs.is_dir():
            print(f"no {testlogs}: run `tools/bazel test //...` first", file=sys.stderr)
            return 1
        fresh.update({label: cases for label, cases in collect(testlogs).items() if cases})
    recorded = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    recorded.update(fresh)
    TIMES.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    count = sum(map(len, fresh.values()))
    print(f"{TIMES.relative_to(ROOT)}: {count} tests of {len(fresh)} targets")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
