#!/usr/bin/env bash
# A client killed while it holds the lock: the waiting client proceeds.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

# No idle release: a CPU-starved A would go idle and hand B the lock (seen
# in a soak beside a second suite); the test is about A's death.
export NVSHARE_SCHED_MODE=on NVSHARE_TQ=30 NVSHARE_IDLE_RELEASE_MS=0
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --alloc 16Mi --kernels 10000 --kernel-us 2000
wait_event 10 lock_ok client=1
app B --alloc 16Mi --kernels 50 --kernel-us 2000
check "B waits behind A" wait_event 10 req_lock client=2 holder=1
# The moment has passed once A, still holding, has run 20 more kernels
# (40 ms of simulated GPU time) after B queued: an ungated B would have
# run its first kernel (1 per PROGRESS line) meanwhile.
na=$(grep -c PROGRESS "$T/A.out")
check "A makes progress while B waits" wait_for 10 lines_at_least "$T/A.out" PROGRESS $((na + 20))
b_idle() { ! grep -q PROGRESS "$T/B.out" && ! has_event lock_ok client=2; }
check "B makes no progress while A holds" b_idle
kill -KILL "$PID_A"
app_wait B 20
check "holder's death frees the lock" has_event lock_released client=1 reason='"disconnect"'
check "B got the lock" has_event lock_ok client=2
check "B finished, memory intact" app_ok B
finish
