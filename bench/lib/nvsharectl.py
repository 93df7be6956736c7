"""Calls to `nvsharectl` on a configuration's scheduler: per-client compute
caps and memory limits (quota scenario), and the counters its --json shows:
lock hold times (quota) and swap totals (pressure). Fake workers
(--selftest) never connect to a scheduler, so these do nothing there."""
import json
import subprocess
import time

import config
from config import CTL_BIN
from orchestration import tool_env


def ctl_set_client(cfg, pid, option, value):
    """nvsharectl --set-client PID OPTION VALUE on cfg's scheduler."""
    if config.FAKE:
        return  # fake workers never connect to the scheduler
    r = subprocess.run([CTL_BIN, "--set-client", str(pid), option, value],
                       env=tool_env(cfg.sock_dir), capture_output=True, text=True, timeout=10)
    if r.returncode:
        raise RuntimeError("nvsharectl --set-client %d %s %s: %s" % (
            pid, option, value, (r.stderr or r.stdout).strip()))


def ctl_core_limit(cfg, pid, core):
    ctl_set_client(cfg, pid, "--core-limit", str(core) if core < 100 else "default")


def ctl_mem_limit(cfg, pid, size):
    ctl_set_client(cfg, pid, "--memory-limit", size)


def sched_held_ns(cfg):
    """{pid: held_ns on its GPU} from `nvsharectl --json`, and the monotonic
    time of the sample (midpoint of the call)."""
    if config.FAKE:
        return time.monotonic(), {}
    t0 = time.monotonic()
    r = subprocess.run([CTL_BIN, "--json"], env=tool_env(cfg.sock_dir), capture_output=True,
                       text=True, timeout=10)
    t = (t0 + time.monotonic()) / 2
    held = {}
    try:
        for cl in json.loads(r.stdout).get("clients", []):
            gs = cl.get("gpus") or []
            if gs:  # a worker uses one GPU
                held[cl["pid"]] = gs[0].get("held_ns", 0)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return t, held


def swap_counters(cfg):
    """The pressure scheduler's per-GPU swap totals (nvsharectl --json)."""
    if config.FAKE or not cfg or not cfg.sock_dir:
        return None
    e = tool_env(cfg.sock_dir)
    try:
        r = subprocess.run([CTL_BIN, "--json"], env=e, capture_output=True, text=True, timeout=10)
        g = json.loads(r.stdout)["gpus"]
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None
    tot = {k: sum(x.get("swap", {}).get(k, 0) for x in g) for k in ("bytes_in", "bytes_out", "ns_in", "ns_out")}
    tot["tq_effective_ms"] = max((x.get("tq_effective_ms", 0) for x in g), default=0)
    return tot
