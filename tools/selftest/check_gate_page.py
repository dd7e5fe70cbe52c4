"""The gate's page (report.html) in a real browser: headless chromium renders a report of
5,000 cases (tools/gate/page_sample.py) written as the gate writes it; the counts in the DOM it
built must be report.json's, every section there in order, the grid's filter script run, the
hostile case id text; then a screenshot.

    python3 -m tools.selftest.check_gate_page [--screenshot PNG] [--height PX]

Needs chromium (Debian: apt-get install -y chromium; .ci/run installs it where missing).
"""

import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

from tools.gate import page_sample, report_html

CHROMIUM = "chromium"
TIMEOUT_S = 90
LEADING = ["verdict", "compared", "regressions", "grid", "culprits", "fixes", "infra"]
LEADING.append("declared")


def chromium(*args: str) -> tuple[int | None, str, str]:
    """(exit status, stdout, stderr) of headless chromium; None where it outlasted
    TIMEOUT_S (a page that never finishes loading: a dialog, an endless script)."""
    # Root (CI, containers) needs --no-sandbox; no GPU in the check's hosts.
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", *args]
    # Its own process group: a timeout ends chromium's helper processes too.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err


def problems(data: dict, dom: str) -> list[str]:
    """What the browser's DOM shows that report.json does not say."""
    found = report_html.marks(dom)
    result, wrong = data["comparison"], []

    def expect(what, got, want):
        if got != want:
            wrong.append(f"{what}: the page shows {got}, report.json says {want}")

    for key, items in result.items():
        if isinstance(items, list) and key in found["counts"]:
            expect(key, set(found["counts"][key]), {len(items)})
    for key in ("targets", "targets_compared", "cases_compared"):
        expect(key, found["counts"].get(key), [result["coverage"][key]])
    expect("regressions shown", found["regressions"], len(result["regressions"]))
    bisected = sum(1 for r in result["regressions"] if (r.get("bisect") or {}).get("steps"))
    expect("culprits on the timeline", found["counts"].get("culprits"), [bisected])
    expect("grid rows", found["grid_rows"], found["counts"]["grid-rows"][0])
    expect("grid rows the filter shows", found["shown"], found["grid_rows"])
    if not found["shown_by_script"]:
        wrong.append("the grid's filter script did not run")
    expect("leading sections", found["sections"][: len(LEADING)], LEADING)
    if page_sample.HOSTILE_CASE not in found["text"]:
        wrong.append(f"the case {page_sample.HOSTILE_CASE!r} is not text in the DOM")
    return wrong


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--screenshot", default=str(pathlib.Path(tempfile.gettempdir()) / "gate_page.png")
    )
    parser.add_argument("--height", type=int, default=3000, help="window height, px")
    parser.add_argument("--cases", type=int, default=5000)
    args = parser.parse_args(argv)
    if shutil.which(CHROMIUM) is None:
        print(f"gate-page: no {CHROMIUM} on PATH (Debian: apt-get install -y chromium)")
        return 1
    with tempfile.TemporaryDirectory(prefix="gate_page.") as tmp:
        out = pathlib.Path(tmp)
        data = page_sample.sample(args.cases, str(out))
        # As the gate writes them (gate.py): the page from the data report.json holds.
        (out / "report.json").write_text(json.dumps(data, indent=1, sort_keys=True))
        data = json.loads((out / "report.json").read_text())
        page = out / "report.html"
        page.write_text(report_html.page(data, out))
        size = page.stat().st_size
        code, dom, err = chromium("--dump-dom", page.as_uri())
        if code != 0 or "<main>" not in dom:
            why = f"not done in {TIMEOUT_S} s" if code is None else f"exit {code}"
            print(f"gate-page: chromium --dump-dom failed ({why}): {err.strip()[-500:]}")
            return 1
        wrong = problems(data, dom)
        shot = pathlib.Path(args.screenshot).resolve()
        shot.unlink(missing_ok=True)
        code, _, err = chromium(
            f"--screenshot={shot}", f"--window-size=1400,{args.height}", page.as_uri()
        )
        if code != 0 or not shot.is_file():
            wrong.append(f"no screenshot (exit {code}): {err.strip()[-300:]}")
        for line in wrong:
            print(f"gate-page: {line}")
        print(
            f"gate-page: {args.cases} cases, {size / 1e6:.2f} MB page, "
            f"{'ok' if not wrong else f'{len(wrong)} problem(s)'}; screenshot {shot}"
        )
        return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
