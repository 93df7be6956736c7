"""Start-up of the processes a run needs and calls to them: one Config per
way of running the jobs (native, or nvshare under one scheduler), its
scheduler on a private socket directory, its two persistent workers
(bench/worker.py), and the commands sent to them."""
import os
import subprocess
import tempfile
import time

import config
from benchlib import Child
from config import (CAP_VAR, CMD_TIMEOUT, DEADLINE, MODE_VAR, PRELOAD, PY, QUOTA_WINDOW_MS, ROOT,
                    SCHED_BIN, SCHED_COMMON_ENV, SCHED_LIBDIR, SOCK_NAME, TQ_INTERACTIVE, TQ_ON,
                    TQ_PRESSURE, TQ_VAR, WORKER)
from progress import left, say

# Socket and hand-off directories of this run; bench.py removes them at the end.
TMPDIRS = []


def mktemp(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    TMPDIRS.append(d)
    return d


class Config:
    """One way of running the jobs: native, or nvshare under one scheduler."""

    def __init__(self, name, label, sched_env=None, client_env=None):
        self.name, self.label = name, label
        self.preload = sched_env is not None
        self.sched_env = sched_env or {}
        self.client_env = client_env or {}
        self.sched = None
        self.sock_dir = None
        self.workers = []
        self.error = None
        self.info = {}

    def usable(self):
        return self.error is None and len(self.workers) == 2 and not any(w.dead for w in self.workers)


def make_configs(only, capacity, swap_env):
    """The configurations the scenarios in `only` need, by name, in the
    order the report lists them."""
    C = {}

    def add(name, label, sched_env=None, client_env=None):
        C[name] = Config(name, label, sched_env, client_env)

    add("native", "no preload, no scheduler")
    if any(s in only for s in ("overhead", "fit", "interactive")):
        add("auto", "nvshare, mode auto (fits: concurrent)", {MODE_VAR: "auto"})
    if "fit" in only:
        # The same, without prefetching fresh allocations to the GPU: shows
        # what the client's prefetch-on-allocation is worth (first touch of
        # fresh managed memory otherwise populates pages by GPU faults).
        add("auto_nopf", "nvshare, mode auto, NVSHARE_PREFETCH_ON_ALLOC=0", {MODE_VAR: "auto"},
            {"NVSHARE_PREFETCH_ON_ALLOC": "0"})
    if any(s in only for s in ("overhead", "fit", "idle")):
        add("on", "nvshare, mode on" + (", TQ %s" % TQ_ON if TQ_ON else " (default TQ)"),
            dict({MODE_VAR: "on"}, **({TQ_VAR: TQ_ON} if TQ_ON else {})))
    if "interactive" in only:
        add("on_i", "nvshare, mode on, TQ %s s" % TQ_INTERACTIVE, {MODE_VAR: "on", TQ_VAR: TQ_INTERACTIVE})
    if "pressure" in only:
        add("pressure", "nvshare auto, capacity %s, TQ %s s" % (capacity, TQ_PRESSURE),
            {MODE_VAR: "auto", CAP_VAR: capacity, TQ_VAR: TQ_PRESSURE})
        if swap_env:
            add("pressure_noswap", "as pressure with %s" % " ".join("%s=%s" % kv for kv in swap_env.items()),
                dict({MODE_VAR: "auto", CAP_VAR: capacity, TQ_VAR: TQ_PRESSURE}, **swap_env), dict(swap_env))
    if "quota" in only:
        add("quota", "nvshare auto, compute window %s ms, caps set with nvsharectl" % QUOTA_WINDOW_MS,
            {MODE_VAR: "auto", "NVSHARE_COMPUTE_WINDOW_MS": QUOTA_WINDOW_MS})
    if all(s in ("sched_latency", "notebooks", "multigpu") for s in only):
        C = {}  # they start their own processes
    return C


def start_private_sched(tag, env_extra, lifetime_s):
    """A scheduler of its own for a scenario that starts its own processes
    (notebooks, multigpu): private socket directory, log
    $BENCH_LOGDIR/sched-TAG.log, killed by `timeout` after lifetime_s at
    the latest. Returns (process, socket directory) once the socket exists."""
    sock = mktemp("nvs-bench-%s." % tag)
    e = tool_env(sock)
    e.update(SCHED_COMMON_ENV)
    e.update(env_extra)
    log = open(os.path.join(config.LOGDIR, "sched-%s.log" % tag), "ab")
    p = subprocess.Popen(["timeout", "-k", "5", str(int(lifetime_s)), SCHED_BIN], env=e, stdout=log,
                         stderr=log)
    end = time.monotonic() + 10
    while time.monotonic() < end and p.poll() is None:
        if os.path.exists(os.path.join(sock, SOCK_NAME)):
            return p, sock
        time.sleep(0.02)
    p.kill()
    raise RuntimeError("scheduler %s did not start" % tag)


def tool_env(sock_dir):
    """Environment for our own binaries (scheduler, nvsharectl,
    sched_latency): their non-libc libraries travel in SCHED_LIBDIR; the
    GPU workers never get it."""
    e = dict(os.environ)
    e["LD_LIBRARY_PATH"] = SCHED_LIBDIR + (":" + e["LD_LIBRARY_PATH"] if e.get("LD_LIBRARY_PATH") else "")
    if sock_dir:
        e["NVSHARE_SOCK_DIR"] = sock_dir
        # nvsharectl talks to the admin socket; each scheduler has its own
        # (never inside the client directory: the scheduler refuses that).
        e["NVSHARE_ADMIN_SOCK_DIR"] = sock_dir + ".admin"
    return e


def start_sched(cfg, dry, real=False):
    cfg.sock_dir = mktemp("nvs-bench-%s." % cfg.name)
    TMPDIRS.append(cfg.sock_dir + ".admin")  # created by the scheduler
    e = tool_env(cfg.sock_dir)
    e.update(SCHED_COMMON_ENV)
    e.update(cfg.sched_env)
    argv = ["timeout", "-k", "5", str(int(DEADLINE + 60)), SCHED_BIN]
    log = os.path.join(config.LOGDIR, "sched-%s.log" % cfg.name)
    if dry or (config.FAKE and not real and not os.path.exists(SCHED_BIN)):
        say("scheduler %-16s %s %s > %s" % (cfg.name, " ".join("%s=%s" % kv for kv in sorted(cfg.sched_env.items())),
                                            " ".join(argv), log))
        return
    cfg.sched = Child("sched-" + cfg.name, argv, e, log)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if os.path.exists(os.path.join(cfg.sock_dir, SOCK_NAME)):
            return
        if not cfg.sched.alive():
            break
        time.sleep(0.02)
    cfg.error = "scheduler did not start (see %s)" % os.path.basename(log)


def start_workers(cfg, dry):
    e = dict(os.environ)
    e["PYTHONUNBUFFERED"] = "1"
    e.pop("LD_PRELOAD", None)
    pre = []
    if cfg.preload:
        pre = ["LD_PRELOAD=" + PRELOAD, "NVSHARE_SOCK_DIR=" + (cfg.sock_dir or "?")]
    pre += ["%s=%s" % kv for kv in sorted(cfg.client_env.items())]
    for slot in range(2):
        name = "%s-%d" % (cfg.name, slot)
        argv = ["timeout", "-k", "5", str(int(DEADLINE + 60)), "env"] + pre + [PY, "-u", WORKER]
        log = os.path.join(config.LOGDIR, "worker-%s.log" % name)
        if dry:
            say("worker    %-16s %s 2> %s" % (name, " ".join(argv), log))
            continue
        if cfg.error:
            return
        cfg.workers.append(Child(name, argv, e, log, pipe=True, cwd=ROOT))


def broadcast(cfgs, cmd, timeout):
    """Sends cmd to every worker of every usable config, then collects."""
    sent = []
    for c in cfgs:
        if not c.usable():
            continue
        for w in c.workers:
            try:
                w.send(cmd)
                sent.append((c, w))
            except RuntimeError as ex:
                c.error = str(ex)
    for c, w in sent:
        try:
            r = w.recv(timeout)
            if not r.get("ok"):
                c.error = "%s: %s failed: %s" % (w.name, cmd["op"], r.get("error"))
            elif cmd["op"] == "hello" and w is c.workers[0]:
                c.info = r
        except RuntimeError as ex:
            c.error = str(ex)


def pair_call(cfg, cmds, timeout=CMD_TIMEOUT):
    """Sends cmds[i] to worker i (None: skip) at once; returns the replies."""
    if not cfg.usable():
        raise RuntimeError(cfg.error or "%s unusable" % cfg.name)
    # Never wait past the run's deadline: a stuck worker costs its config,
    # not the report.
    timeout = max(5.0, min(timeout, left() - 5))
    for w, c in zip(cfg.workers, cmds):
        if c is not None:
            w.send(c)
    out = []
    for w, c in zip(cfg.workers, cmds):
        if c is None:
            out.append(None)
            continue
        try:
            r = w.recv(timeout)
        except RuntimeError as ex:
            cfg.error = str(ex)
            raise
        if not r.get("ok"):
            raise RuntimeError("%s: %s" % (w.name, r.get("error")))
        out.append(r)
    return out
