#!/usr/bin/env bash
# nvs-test: exclusive (a latency bound: other tests' load is not what it measures)
# Runs bench/sched_latency briefly: lock round trip and handoff with 2 and
# 64 clients; handoff p99 must stay under 5 ms (generous: ~50 us typical),
# 20 ms in the sanitizer build (ASan slows the scheduler several times; seen
# 9 ms beside two CPU burners). A regression guard, not a performance
# figure: those come from bench/run.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

bound=5
[ -f "$B/.san" ] && bound=20
start_scheduler --no-nvml
"$B/bench/sched_latency" --clients 2,64 --rounds 1000 --check-handoff-p99-ms "$bound" >"$T/bench.out" 2>&1
rc=$?
sed 's/^/# /' "$T/bench.out"
check "benchmark ran (2 and 64 clients)" test "$(grep -cE '^(2|64) +(lock_rtt|handoff)' "$T/bench.out")" = 4
check "handoff p99 < $bound ms with 2 and 64 clients" test "$rc" = 0
check "scheduler healthy after the benchmark" sched_alive
