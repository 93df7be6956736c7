#!/usr/bin/env bash
# Scheduler killed mid-run: the application keeps running (ungated), then
# re-registers with the new scheduler (HELLO, ATTACH_GPU with its memory) and
# is gated again.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

export NVSHARE_SCHED_MODE=on
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --alloc 32Mi --kernels 2000 --kernel-us 2000
check "holds the lock" wait_event 10 lock_ok client=1
kill -KILL "$SCHED_PID"
check "notices the loss" wait_log 10 "$T/A.err" "connection lost"
# The old one's lock file is free once it has exited (t_client_probe.sh).
wait "$SCHED_PID" 2>/dev/null
n1=$(grep -c PROGRESS "$T/A.out")
wait_for 10 lines_at_least "$T/A.out" PROGRESS $((n1 + 1)); n2=$(grep -c PROGRESS "$T/A.out")
check "keeps running without the scheduler ($n1 -> $n2 kernels)" [ "$n2" -gt "$n1" ]
start_scheduler
check "new scheduler listening" wait_events 10 2 listening socket='"client"'
check "re-registers (second HELLO)" wait_events 10 2 hello client=1
wait_events 10 2 attach client=1
# (the first scheduler saw the attach before the allocation)
check "re-attaches with its current memory (32Mi)" has_event attach client=1 allocated=$((32 << 20))
check "is gated again (LOCK_OK from the new scheduler)" wait_events 10 2 lock_ok client=1
app_wait A 30
check "finishes, memory intact" app_ok A
check "exits with status 0 (never crashed)" wait "$PID_A"
finish
