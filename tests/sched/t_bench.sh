#!/usr/bin/env bash
# Runs bench/sched_latency briefly: lock round trip and handoff with 2 and
# 64 clients, figures reported. The target is a handoff p99 under 5 ms (~50
# us typical when idle); the benchmark's regression bound, 50 ms (100 ms in
# the sanitizer build) times the machine's speed factor, is asserted when
# bench/cpu/run runs this test (NVS_TIMING_TARGETS=1, one test at a time);
# in the tiers, beside other tests' load, the bound is a hang guard of 1 s
# (docs/testing.md: no test outside tests/core/ asserts a duration tighter
# than a hang guard). Either catches a handoff that waits for the drop
# grace or a lost wake-up; the 50 ms bound also one that waits for a timer
# (the 20 ms idle release). Performance figures come from bench/run.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

bound=$(latency_limit 50 1000) # ms, times the speed factor (tests/lib.sh)
[ -f "$B/.san" ] && bound=$((2 * bound))
diag "speed factor $(speed_factor)"
start_scheduler --no-nvml
"$B/bench/sched_latency" --clients 2,64 --rounds 1000 --check-handoff-p99-ms "$bound" >"$T/bench.out" 2>&1
rc=$?
sed 's/^/# /' "$T/bench.out"
check "benchmark ran (2 and 64 clients)" test "$(grep -cE '^(2|64) +(lock_rtt|handoff)' "$T/bench.out")" = 4
check "handoff p99 < $bound ms with 2 and 64 clients" test "$rc" = 0
check "scheduler healthy after the benchmark" sched_alive
