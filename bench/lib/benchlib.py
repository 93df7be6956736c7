"""Helpers for bench/bench.py that need no GPU: statistics, cell formatting,
Markdown tables, the docs section replacement, and a child process with a
line-oriented JSON pipe and timeouts."""
import json
import os
import select
import signal
import subprocess
import time

# ------------------------------------------------------------- statistics


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def pct(xs, p):
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = max(1, int(-(-p * len(s) // 100)))  # ceil(p/100 * n)
    return s[min(k, len(s)) - 1]


def ratios(xs, base):
    """Per-repetition ratios of paired lists."""
    return [x / b for x, b in zip(xs, base) if b > 0]


# ------------------------------------------------------------- formatting


def fmt_s(x):
    if x != x:
        return "n/a"
    if x >= 1.0:
        return "%.3f s" % x
    return "%.2f ms" % (x * 1e3) if x >= 1e-3 else "%.1f µs" % (x * 1e6)


def fmt_ms(x):
    return "n/a" if x != x else ("%.1f ms" % (x * 1e3))


def cell_time(xs):
    if not xs:
        return "n/a"
    if len(xs) == 1:
        return fmt_s(xs[0])
    return "%s (%s–%s)" % (fmt_s(median(xs)), fmt_s(min(xs)), fmt_s(max(xs)))


def cell_ratio(rs):
    if not rs:
        return "n/a"
    if len(rs) == 1:
        return "%.3f×" % rs[0]
    return "**%.3f×** (%.3f–%.3f)" % (median(rs), min(rs), max(rs))


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def replace_section(text, section, begin, end):
    """Replaces what lies between the begin/end markers (markers kept), or
    appends the markers and the section."""
    block = "%s\n%s\n%s" % (begin, section.rstrip("\n"), end)
    i = text.find(begin)
    j = text.find(end, i + 1) if i >= 0 else -1
    if i >= 0 and j >= 0:
        return text[:i] + block + text[j + len(end):]
    sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    return text + sep + block + "\n"


# ------------------------------------------------------------- processes


class Child:
    """A child process. With pipe=True, stdin/stdout carry one JSON object
    per line (bench/worker.py); stderr goes to `log`."""

    def __init__(self, name, argv, env, log, pipe=False, cwd=None):
        self.name = name
        self.argv = argv
        self.log_path = log
        self._log = open(log, "ab")
        self.pipe = pipe
        self.buf = b""
        self.dead = None  # reason, once unusable
        self.p = subprocess.Popen(
            argv, env=env, cwd=cwd,
            stdin=subprocess.PIPE if pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE if pipe else self._log,
            stderr=self._log, bufsize=0)

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p.poll() is None

    def send(self, obj):
        if self.dead:
            raise RuntimeError(self.dead)
        try:
            self.p.stdin.write((json.dumps(obj) + "\n").encode())
            self.p.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            self.dead = "%s: pipe closed (%s)" % (self.name, e)
            raise RuntimeError(self.dead)

    def recv(self, timeout):
        if self.dead:
            raise RuntimeError(self.dead)
        end = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                self.dead = "%s: no reply within %.0f s" % (self.name, timeout)
                raise RuntimeError(self.dead)
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self.dead = "%s: exited (status %s)" % (self.name, self.p.poll())
                raise RuntimeError(self.dead)
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line.decode())

    def call(self, obj, timeout):
        self.send(obj)
        return self.recv(timeout)

    def stop(self, grace=3.0):
        if self.p.poll() is None:
            if self.pipe:
                try:
                    self.p.stdin.close()  # EOF: the worker exits by itself
                except OSError:
                    pass
            else:
                self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                self.p.send_signal(signal.SIGTERM)
                try:
                    self.p.wait(2)
                except subprocess.TimeoutExpired:
                    self.p.kill()
                    self.p.wait()
        self._log.close()
