"""TAP output and hang guards for the device-plugin scenario scripts
(dp_tests.py, dp_podsock_tests.py, dra_tests.py)."""

import sys
import time

from fake_kubelet import SPEED

_n = 0
_failed = 0


def ok(cond, desc, diag=None):
    global _n, _failed
    _n += 1
    if cond:
        print("ok %d - %s" % (_n, desc), flush=True)
    else:
        _failed += 1
        print("not ok %d - %s" % (_n, desc), flush=True)
        if diag is not None:
            for line in str(diag).splitlines():
                print("#   " + line, flush=True)


def skip(desc, why):
    global _n
    _n += 1
    print("ok %d - %s # SKIP %s" % (_n, desc, why), flush=True)


def done(procs=()):
    """Kills what is left of procs (subprocess.Popen), prints the plan;
    the exit status."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    print("1..%d" % _n)
    sys.stdout.flush()
    return 1 if _failed else 0


# Every timeout is a hang guard, stretched by the suite's speed factor.
def guard(seconds):
    return seconds * SPEED


def wait_until(pred, timeout):
    end = time.monotonic() + guard(timeout)
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()
