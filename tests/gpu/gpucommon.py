"""Helpers shared by the GPU test cases (tests/gpu/c*.py).

No GPU library is imported here: the runner's verdict code (verdict.py) uses
these helpers too and must work without torch.
"""
import json
import os
import sys
import time

# Exit status a case uses when a prerequisite (a Python package, a GPU
# backend) is missing: the runner reports "# SKIP" instead of a failure.
EXIT_PREREQ = 77


def now():
    """CLOCK_MONOTONIC seconds: comparable between processes on one host."""
    return time.monotonic()


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def touch(path):
    with open(path, "w") as f:
        f.write("%.9f\n" % now())


def wait_file(path, timeout, poll=0.0005):
    """Waits until path exists; returns False on timeout."""
    end = now() + timeout
    while not os.path.exists(path):
        if now() > end:
            return False
        time.sleep(poll)
    return True


def prereq_missing(why):
    print("PREREQ-MISSING: %s" % why, flush=True)
    sys.exit(EXIT_PREREQ)


def log(*a):
    print("[%.6f]" % now(), *a, flush=True)


def checker():
    """(checks, check) for a case that writes {"checks": [[ok, what]]}
    (verdict.py checks_of): check(ok, what) records and prints one."""
    checks = []

    def check(ok, what):
        checks.append([bool(ok), what])
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        return ok
    return checks, check
