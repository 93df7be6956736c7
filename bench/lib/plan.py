"""The dry run's plan (bench/run --dry-run): each scenario's configurations
and the commands its workers get, and a rough estimate of the GPU time."""
import config
from config import (BATCH_N, BURST_K, BURST_PERIOD, BURST_SIZE, BURSTS, LEAD_IN, OVERHEAD_LAUNCH_ITERS,
                    OVERHEAD_MM_ITERS, OVERHEAD_MM_N, PINGPONG_HANDOFFS, PINGPONG_MARGIN, QUOTA_LEAD,
                    QUOTA_MEASURE, QUOTA_MM_N, QUOTA_PAIRS, QUOTA_REPS, QUOTA_SINGLES, QUOTA_SKIP,
                    REPS_OVERHEAD, REPS_PAIR, SCHED_LATENCY_ARGS, SCHED_LATENCY_BIN)
from progress import say


def plan_dry(only, small, normal):
    say("plan (each line: scenario -> configurations, commands sent to the workers):")
    t = 0.0
    if "overhead" in only:
        say("overhead    -> native, auto, on (worker 0): 1 warm + %d reps of compute "
            "{bf16 %d^3 x %d} and launch {%d adds}" % (REPS_OVERHEAD, OVERHEAD_MM_N,
                                                     OVERHEAD_MM_ITERS, OVERHEAD_LAUNCH_ITERS))
        t += 3 * (REPS_OVERHEAD + 1) * (OVERHEAD_MM_ITERS * 0.00165 + 0.3)
    if "fit" in only:
        say("fit         -> native, auto, on: both workers job{add|mm, %d MiB} at one start_at, %d reps" % (
            small, REPS_PAIR))
        t += 2 * REPS_PAIR * 3 * 1.4
    if "idle" in only:
        say("idle        -> on: pingpong %d hand-offs, margin %.1f s" % (PINGPONG_HANDOFFS, PINGPONG_MARGIN))
        t += PINGPONG_HANDOFFS * 0.4
    if "interactive" in only:
        say("interactive -> native, auto, on_i: worker 0 batch{bf16 %d^3}, worker 1 %d bursts x %d mm %d^2 "
            "every %.1f s" % (BATCH_N, BURSTS, BURST_K, BURST_SIZE, BURST_PERIOD))
        t += 3 * (LEAD_IN + BURSTS * BURST_PERIOD + 1)
    if "pressure" in only:
        say("pressure    -> native (sequential and side by side), pressure[, pressure_noswap]: "
            "job{add|mm, %d MiB} x2, %d reps" % (normal, REPS_PAIR))
        t += 2 * REPS_PAIR * 4 * 2.4
    if "sched_latency" in only:
        say("sched_lat.  -> %s %s" % (SCHED_LATENCY_BIN, " ".join(SCHED_LATENCY_ARGS)))
        t += 15
    if "quota" in only:
        say("quota       -> quota: nvsharectl caps, worker spin{bf16 %d^3, batches of %d, timing %s}: "
            "alone, uncapped pair, singles %s, pairs %s x %d reps; %.1f s lead + %.1f s each" % (
                QUOTA_MM_N, config.QUOTA_SYNC, config.QUOTA_TIMING, QUOTA_SINGLES, QUOTA_PAIRS, QUOTA_REPS,
                QUOTA_LEAD, QUOTA_MEASURE))
        t += (5 + QUOTA_REPS * (len(QUOTA_SINGLES) + len(QUOTA_PAIRS))) * (
            QUOTA_LEAD + QUOTA_SKIP + QUOTA_MEASURE + 0.5) + 30
    if "multigpu" in only:
        import multigpu
        say("multigpu    -> native, nvshare (capacity %s): 4 x job_add{%d MiB, %d iters}, 2 per GPU; "
            "NCCL all-reduce %d MiB x %d; %d reps each" % (
                multigpu.MG_CAPACITY, multigpu.MG_MIB, multigpu.MG_ITERS, multigpu.MG_NCCL_MIB,
                multigpu.MG_NCCL_ITERS, multigpu.MG_REPS))
        t += multigpu.MG_COST
    say("estimated GPU time ~%.0f s plus ~20 s of worker start-up and warm-up" % t)
