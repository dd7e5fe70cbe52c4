"""Sleeps SLEEP_S seconds (default 30); on SIGTERM prints a line and exits, as the runner does."""

import os
import signal
import sys
import time


def _terminated(signum, frame):
    print("sleeper: got SIGTERM", flush=True)
    sys.exit(143)


signal.signal(signal.SIGTERM, _terminated)
print("sleeper: pid", os.getpid(), flush=True)
time.sleep(float(os.environ.get("SLEEP_S", "30")))
print("sleeper: woke up")
