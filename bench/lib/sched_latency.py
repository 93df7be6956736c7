"""Scenario sched_latency: bench/sched_latency (colleague's tool) against a
scheduler started for it (lock round trip and hand-off latencies), and its
report section, which includes the tool's table as is."""
import os
import subprocess

import config
from benchlib import md_table
from config import MODE_VAR, ROOT, SCHED_LATENCY_ARGS, SCHED_LATENCY_BIN
from orchestration import Config, start_sched, tool_env
from progress import left, say


def run_sched_latency(R, dry):
    """bench/sched_latency measures a running scheduler: start one (mode
    auto, without NVML; the tool attaches its clients to a made-up GPU
    reporting more memory than any capacity, so the scheduler serializes
    it)."""
    if not os.path.exists(SCHED_LATENCY_BIN):
        R["sched_latency"] = {"missing": SCHED_LATENCY_BIN}
        return
    # One process opens all the clients (2, then 64 right after closing the
    # 2): as one tenant it would meet the per-tenant connection cap and
    # accept rate, and its mode flips the switch budget, none of which is
    # what this measures (hostile load has its own tests).
    cfg = Config("lat", "scheduler for sched_latency", {
        MODE_VAR: "auto", "NVSHARE_MAX_CONNS_PER_TENANT": "0", "NVSHARE_ACCEPT_RATE": "0",
        "NVSHARE_MAX_IDLE_CLIENTS_PER_TENANT": "0", "NVSHARE_MODE_DWELL_MS": "0",
        # and the handshake deadline: a loaded machine that stalls the
        # scheduler after it accepted 64 connections must not close them.
        "NVSHARE_HANDSHAKE_TIMEOUT_MS": "0",
        # The tool attaches a made-up GPU (GPU-nvshare-bench): with NVML
        # the scheduler refuses UUIDs it does not know (docs/security.md
        # "GPU identifiers"), so this one learns GPUs from its clients.
        "NVSHARE_SCHED_NVML": "0"})
    start_sched(cfg, dry, real=True)
    e = tool_env(cfg.sock_dir)
    argv = ["timeout", "-k", "5", str(int(max(10, min(90, left() - 10)))), SCHED_LATENCY_BIN] + SCHED_LATENCY_ARGS
    if dry:
        say("sched_latency: NVSHARE_SOCK_DIR=%s %s" % (cfg.sock_dir, " ".join(argv)))
        return
    try:
        if cfg.error:
            R["sched_latency"] = {"rc": -1, "stdout": "", "cmd": "", "error": cfg.error}
            return
        p = subprocess.run(argv, env=e, cwd=ROOT, capture_output=True, text=True)
    finally:
        if cfg.sched:
            cfg.sched.stop()
    with open(os.path.join(config.LOGDIR, "sched_latency.log"), "w") as f:
        f.write(p.stdout + "\n--- stderr ---\n" + p.stderr)
    why = ""
    if p.returncode:
        # The scheduler's own word on the connections it closed.
        try:
            with open(os.path.join(config.LOGDIR, "sched-lat.log")) as f:
                why = " | ".join(ln.strip()[-160:] for ln in f if "closing conn" in ln or "doom" in ln)[-600:]
        except OSError:
            pass
    R["sched_latency"] = {"rc": p.returncode, "stdout": p.stdout,
                          "stderr": (p.stderr.strip() + (" [scheduler: %s]" % why if why else ""))[-900:],
                          "cmd": " ".join(["bench/sched_latency"] + SCHED_LATENCY_ARGS)}


def text_table_to_md(text):
    """Whitespace-separated columns with a header line -> Markdown table;
    '#' lines are kept as notes below it."""
    rows = [ln.split() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    notes = [ln for ln in text.splitlines() if ln.startswith("#")]
    if len(rows) < 2 or any(len(r) != len(rows[0]) for r in rows):
        return "```\n%s\n```" % text.strip()
    return md_table(rows[0], rows[1:]) + ("\n\n" + "\n".join("    " + n for n in notes) if notes else "")


def sched_latency_section(s, meta, L, T):
    L.append("### Scheduler costs (`bench/sched_latency`)")
    L.append("")
    if "missing" in s:
        L.append("Not run: %s was not built." % os.path.relpath(s["missing"], ROOT))
    else:
        L.append("`%s` against a scheduler started for it (per-tenant connection bounds and the "
                 "mode-switch budget off); exit status %d%s." % (
            s["cmd"] or "sched_latency", s["rc"], (": " + (s.get("error") or s.get("stderr", "").strip()[-300:]))
            if s["rc"] else ""))
        L.append("Lock round trip = REQ_LOCK -> LOCK_OK with the GPU free; handoff = holder's "
                 "LOCK_RELEASED -> next holder's LOCK_OK; microseconds.")
        L.append("")
        L.append(text_table_to_md(s["stdout"]))
    L.append("")
