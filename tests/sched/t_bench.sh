#!/usr/bin/env bash
# Runs bench/sched_latency briefly: lock round trip and handoff with 2 and
# 64 clients; handoff p99 must stay under 5 ms (generous: ~50 us typical).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

start_scheduler --no-nvml
"$B/bench/sched_latency" --clients 2,64 --rounds 1000 --check-handoff-p99-ms 5 >"$T/bench.out" 2>&1
rc=$?
sed 's/^/# /' "$T/bench.out"
check "benchmark ran (2 and 64 clients)" test "$(grep -cE '^(2|64) +(lock_rtt|handoff)' "$T/bench.out")" = 4
check "handoff p99 < 5 ms with 2 and 64 clients" test "$rc" = 0
check "scheduler healthy after the benchmark" sched_alive
