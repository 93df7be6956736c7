"""The Markdown report: a header (GPU, command, sizes, configurations), the
targets table (each target met or not), then each scenario's section in
the order of SCENARIOS. The sections live beside their scenarios; each
appends its lines to L and its measured targets to T."""
from benchlib import md_table
from config import BUDGET_PCT, REPS_OVERHEAD, REPS_PAIR, TARGETS
from idle import idle_section
from interactive import interactive_section
from multigpu import multigpu_section
from notebooks import notebooks_section
from overhead import overhead_section
from quota_report import quota_section
from sched_latency import sched_latency_section
from swapbench import swapspeed_section, vmmtrain_section
from two_jobs import fit_section, pressure_section

# Each section gets its scenario's results (R[name]); one that did not run
# has none and no section.
SECTIONS = [("overhead", overhead_section), ("fit", fit_section), ("idle", idle_section),
            ("interactive", interactive_section), ("pressure", pressure_section),
            ("sched_latency", sched_latency_section), ("quota", quota_section),
            ("notebooks", notebooks_section), ("multigpu", multigpu_section),
            ("swapspeed", swapspeed_section), ("vmmtrain", vmmtrain_section)]


def verdict(ok):
    return "n/a" if ok is None else ("**met**" if ok else "**not met**")


def report(R, meta, C):
    L = []
    T = {}  # target key -> (measured text, ok or None)
    L.append("## Benchmark run %s" % meta["date"])
    L.append("")
    L.append("- GPU: %s, driver %s, CUDA %s (driver); PyTorch %s (CUDA %s)" % (
        meta["gpu"]["name"], meta["gpu"]["driver"], meta["gpu"]["cuda"], meta.get("torch", "?"),
        meta.get("torch_cuda", "?")))
    L.append("- Command: `%s`" % meta["command"])
    L.append("- Free GPU memory at start %d MiB of %d MiB; working sets %d MiB (small) / %d MiB (normal)%s." % (
        meta["gpu"]["free_mib"], meta["gpu"]["total_mib"], meta["small_mib"], meta["normal_mib"],
        ", scaled down to fit %d%% of free memory" % BUDGET_PCT if meta["mem_scale"] < 1 else ""))
    L.append("- Cells: ratio to native first (**median** over repetitions, (min–max) of the "
             "per-repetition ratios), then absolute times as median (min–max). Overhead: %d repetitions, "
             "two-job scenarios: %d; configurations interleaved per repetition." % (REPS_OVERHEAD, REPS_PAIR))
    L.append("- Configurations: %s." % "; ".join("`%s` = %s" % (c.name, c.label) for c in C.values()))
    broken = ["`%s`: %s" % (c.name, c.error) for c in C.values() if c.error]
    if broken:
        L.append("- Failures: " + "; ".join(broken))
    L.append("")

    for name, section in SECTIONS:
        if R.get(name):
            section(R[name], meta, L, T)

    # the targets table goes right after the header bullets
    rows = [[text, T[k][0], verdict(T[k][1])] for k, text, _ in TARGETS if k in T]
    tgt = ["### Targets", "", md_table(["target", "measured", "status"], rows), ""] if rows else []
    return "\n".join(_assemble(L, tgt))


def _assemble(L, tgt):
    # L: header lines up to the first blank after the bullet list, then sections.
    k = 0
    for idx, line in enumerate(L):
        if idx > 1 and line == "":
            k = idx + 1
            break
    return L[:k] + tgt + L[k:]
