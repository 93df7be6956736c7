"""The run's clock and its progress lines.

T_START is taken when this module is first imported (bench.py, at start), so
every scenario measures what is left against one BENCH_DEADLINE: call
left(), never keep a copy of it.
"""
import time

from config import DEADLINE

T_START = time.monotonic()


def left():
    """Seconds left before the run's deadline (negative once past it)."""
    return DEADLINE - (time.monotonic() - T_START)


def say(*a):
    """A progress line on stdout; '#' keeps it apart from the report."""
    print("#", *a, flush=True)
