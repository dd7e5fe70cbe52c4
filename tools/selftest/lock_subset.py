"""Prints the pins of a lock for the named distributions alone, as a lock (tools/python/lock.py).

    python3 -m tools.selftest.lock_subset LOCK NAME... > small.lock

For self-tests that need a cheap @pypi (TORCH_TEST_LOCK): same pins and hashes, fewer packages.
"""

import sys

from tools.python import lock


def main(argv: list[str]) -> int:
    path, *names = argv
    pins = lock.read(path)
    wanted = {lock.canonicalize_name(n) for n in names}
    unknown = sorted(wanted - set(pins))
    if unknown:
        print(f"lock_subset: not in {path}: {unknown}", file=sys.stderr)
        return 1
    sys.stdout.write(lock.render({n: pins[n] for n in wanted}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
