"""The project's self-tests, by name (the table: tools/selftest/registry.py).

    python3 -m tools.selftest --list          each check: name, cost, needs, base, what it checks
    python3 -m tools.selftest NAME...         those checks, whatever this host has
    python3 -m tools.selftest --all           every check this host can run; the others are
                                              named as SKIPPED with the need it lacks
    ... --parallel                            two lanes at once (CI): the checks on the
                                              workspace's Bazel server (or none) in one, those
                                              with output bases of their own in the other

Each check prints `::: NAME: COMMAND` when it starts and `::: NAME: ok in N s` or
`::: NAME: FAILED in N s` when it ends (.ci/run's step lines); with --parallel its output is
held and printed whole before that line. The exit status is 1 if any check failed (or a named
one cannot run here), else 0.
"""

import argparse
import subprocess
import sys
import tempfile
import threading
import time

from tools.selftest import needs as host
from tools.selftest.registry import BY_NAME, CHECKS, Check

ROOT = host.ROOT
# The lanes of --parallel, by the Bazel server a check drives (registry.py's `base`): one
# server's commands queue anyway, and different output bases share nothing but the cores.
LANES = (("none", "workspace"), ("scratch", "own"))

_print = threading.Lock()


def say(line: str) -> None:
    with _print:
        print(line, flush=True)


def list_checks() -> None:
    width = max(len(c.name) for c in CHECKS)
    print(f"{'name':{width}}  {'cost':>6}  {'base':9}  needs / what it checks")
    for c in CHECKS:
        print(f"{c.name:{width}}  {c.cost_s:>4} s  {c.base:9}  {', '.join(c.needs) or '-'}")
        print(f"{'':{width}}  {'':6}  {'':9}  {c.what}")
    print("\nneeds: " + "; ".join(f"{k}: {v[0]}" for k, v in host.NEEDS.items()))
    print(
        f"{len(CHECKS)} checks, about {sum(c.cost_s for c in CHECKS) // 60} min one after another"
    )


def lacking(check: Check) -> list[str]:
    """The needs of CHECK this host lacks, each with its reason."""
    return [f"{n} ({why})" for n in check.needs if (why := host.missing(n)) is not None]


def run(check: Check, hold_output: bool) -> bool:
    say(f"::: {check.name}: {' '.join(check.argv)}")
    start = time.monotonic()
    if hold_output:
        with tempfile.TemporaryFile("w+") as out:
            code = subprocess.run(check.argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
            out.seek(0)
            held = out.read()
    else:
        code, held = subprocess.run(check.argv, cwd=ROOT), ""
    verdict = "ok" if code.returncode == 0 else "FAILED"
    with _print:
        sys.stdout.write(held)
        print(f"::: {check.name}: {verdict} in {time.monotonic() - start:.0f} s", flush=True)
    return code.returncode == 0


def run_lane(checks: list[Check], hold_output: bool, failed: list, skipped: list) -> None:
    for check in checks:
        missing = lacking(check)
        if missing:
            say(f"::: {check.name}: SKIPPED, this host lacks {'; '.join(missing)}")
            skipped.append(check.name)
        elif not run(check, hold_output):
            failed.append(check.name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m tools.selftest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="*", metavar="NAME")
    parser.add_argument("--list", action="store_true", help="the checks, and what each needs")
    parser.add_argument("--all", action="store_true", help="every check this host can run")
    parser.add_argument("--parallel", action="store_true", help="two lanes at once (see above)")
    args = parser.parse_args(argv)
    if args.list:
        list_checks()
        return 0
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown or not (args.all or args.names):
        parser.error(
            f"unknown check(s): {' '.join(unknown)}" if unknown else "name checks, or --all"
        )
    # --all in the registry's order; named ones as named.
    chosen = list(CHECKS) if args.all else [BY_NAME[n] for n in args.names]
    failed, skipped = [], []
    if args.parallel:
        lanes = [[c for c in chosen if c.base in bases] for bases in LANES]
        threads = [
            threading.Thread(target=run_lane, args=(lane, True, failed, skipped)) for lane in lanes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        run_lane(chosen, False, failed, skipped)
    ran = len(chosen) - len(skipped)
    say(
        f"::: self-tests: {ran - len(failed)} of {ran} ok"
        + (f"; skipped: {' '.join(skipped)}" if skipped else "")
        + (f"; FAILED: {' '.join(failed)}" if failed else "")
    )
    # A check named explicitly that cannot run here is a failure: the caller asked for it.
    return 1 if failed or (skipped and not args.all) else 0


if __name__ == "__main__":
    sys.exit(main())
