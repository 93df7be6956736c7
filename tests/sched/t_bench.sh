#!/usr/bin/env bash
# nvs-test: exclusive (a latency bound: other tests' load is not what it measures)
# Runs bench/sched_latency briefly: lock round trip and handoff with 2 and
# 64 clients. The target is a handoff p99 under 5 ms (~50 us typical when
# idle), reported here; the assertion is a regression guard with room for a
# busy machine (seen: 9 ms beside two burners, 7.8 ms beside a second suite
# and burners): 50 ms, 100 ms in the sanitizer build, times the machine's
# speed factor (tests/lib.sh). It still catches a
# handoff that waits for a timer (the 20 ms idle release, the 1 s tick).
# Performance figures come from bench/run.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

bound=50
[ -f "$B/.san" ] && bound=100
bound=$(scaled "$bound") # wall time: stretched by the speed factor (tests/lib.sh)
diag "speed factor $(speed_factor)"
start_scheduler --no-nvml
"$B/bench/sched_latency" --clients 2,64 --rounds 1000 --check-handoff-p99-ms "$bound" >"$T/bench.out" 2>&1
rc=$?
sed 's/^/# /' "$T/bench.out"
check "benchmark ran (2 and 64 clients)" test "$(grep -cE '^(2|64) +(lock_rtt|handoff)' "$T/bench.out")" = 4
check "handoff p99 < $bound ms with 2 and 64 clients" test "$rc" = 0
check "scheduler healthy after the benchmark" sched_alive
