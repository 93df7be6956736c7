#!/usr/bin/env python3
"""Logs moments when this machine did not run a sleeping process on time,
when its file system did not take a small write on time, and processes
held stopped or in uninterruptible sleep.

    scripts/stall-monitor.py LOG [--period S] [--min-gap S] [--dir DIR]

Three probes, each in its own thread (sleep and fs every PERIOD, 0.2 s):
- sleep: sleeps PERIOD. A sleeper asks for microseconds of CPU, so a gap of
  seconds means the whole machine stopped running ready processes (host
  contention, a paused VM), which no test bound can allow for.
- fs: creates a file in DIR (default: the temporary directory, where the
  tests keep theirs), writes a byte, closes and removes it: what a test's
  shell does with every redirection. On ext4 each of those needs a journal
  handle, so a stalled journal commit (a slow disk, synchronous discards)
  stops such a process while the sleeper runs on.
- proc: every 0.5 s, the state of every process in /proc: one that stays
  stopped (T: a signal or a tracer) or in uninterruptible sleep (D: the
  kernel, mostly I/O) for over MIN_GAP is logged when it leaves that state,
  with its pid, name and parent. Some tests stop processes on purpose
  (t_stop_holder, t_healthz, t_silent_sched, t_quota, t_sim_stop,
  t_identity); any other name is a process something froze.
Each probe that took longer than MIN_GAP (1 s) appends a line to LOG: the
wall time it ended, how long it took, /proc/loadavg, the probe's name,
how many seconds of I/O stall the kernel booked meanwhile (/proc/pressure/io
"some": at least one task waiting for I/O; "full" stays 0 beside CPU
burners, which always have a task running; "-" where not readable) and, for
proc, STATE:PID:NAME:ppid=PPID and where in the kernel it waited (its
wchan and /proc/PID/stack, read once it has waited 1 s; the stack needs
root).
The soak (scripts/soak-tests.sh) runs it beside its rounds and names the
stalls of a failing round, so such a failure is told apart from a test's
own defect. Runs until killed.
"""
import argparse
import os
import tempfile
import threading
import time

LOCK = threading.Lock()


def io_some_us():
    """The kernel's total of I/O "some" stall time (us), or None."""
    try:
        with open("/proc/pressure/io") as f:
            for line in f:
                if line.startswith("some"):
                    return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def report(log, gap, kind, io0, what=""):
    try:
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:4])
    except OSError:
        load = "?"
    io1 = io_some_us()
    io = "-" if io0 is None or io1 is None else "%.2f" % ((io1 - io0) / 1e6)
    with LOCK, open(log, "a") as f:
        f.write(("%.3f %.2f %s %s %s %s" % (time.time(), gap, load, kind, io, what)).rstrip()
                + "\n")


def sleep_probe(a):
    prev, io0 = time.monotonic(), io_some_us()
    while True:
        time.sleep(a.period)
        now = time.monotonic()
        if now - prev > a.min_gap:
            report(a.log, now - prev, "sleep", io0)
        prev, io0 = now, io_some_us()


def fs_probe(a):
    path = os.path.join(a.dir, ".nvs-stall-probe.%d" % os.getpid())
    while True:
        time.sleep(a.period)
        io0, t0 = io_some_us(), time.monotonic()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, b"x")
            os.close(fd)
            os.unlink(path)
        except OSError:
            pass
        took = time.monotonic() - t0
        if took > a.min_gap:
            report(a.log, took, "fs", io0)


def proc_states():
    """{pid: (state, name, ppid)} of the processes stopped or in D."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                st = f.read()
        except OSError:
            continue
        name = st[st.find("(") + 1:st.rfind(")")]
        rest = st[st.rfind(")") + 2:].split()
        if rest and rest[0] in ("T", "t", "D"):
            out[int(pid)] = (rest[0], name.replace(" ", "_"), rest[1])
    return out


def kernel_wait(pid):
    """Where a blocked process waits in the kernel: its wchan and the
    function names of its kernel stack's first 8 frames."""
    def read(f):
        try:
            with open("/proc/%d/%s" % (pid, f)) as fh:
                return fh.read().strip()
        except OSError:
            return ""
    # A stack line: "[<0>] dup_mmap+0x38f/0x7e0".
    frames = [ln.split("] ", 1)[-1].split("+")[0] for ln in read("stack").splitlines()]
    where = ":wchan=%s" % (read("wchan") or "?")
    return where + (":stack=" + ",".join(frames[:8]) if frames else "")


def proc_probe(a):
    since = {}  # pid -> [first seen, state, name, ppid, io total then, where]
    while True:
        time.sleep(0.5)
        now, cur = time.monotonic(), proc_states()
        for pid, (t0, state, name, ppid, io0, where) in list(since.items()):
            if cur.get(pid, (None,))[0] != state:
                del since[pid]
                if now - t0 > a.min_gap:
                    report(a.log, now - t0, "proc", io0,
                           "%s:%d:%s:ppid=%s%s" % (state, pid, name, ppid, where))
            elif where == "" and now - t0 > a.min_gap:
                since[pid][5] = kernel_wait(pid)
        for pid, (state, name, ppid) in cur.items():
            if pid not in since:
                since[pid] = [now, state, name, ppid, io_some_us(), ""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--period", type=float, default=0.2)
    ap.add_argument("--min-gap", type=float, default=1.0)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()
    threading.Thread(target=fs_probe, args=(a,), daemon=True).start()
    threading.Thread(target=proc_probe, args=(a,), daemon=True).start()
    sleep_probe(a)


if __name__ == "__main__":
    main()
