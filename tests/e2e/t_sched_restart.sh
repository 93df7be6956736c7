#!/usr/bin/env bash
# Scheduler killed mid-run: the application keeps running (ungated), then
# re-registers with the new scheduler (HELLO, ATTACH_GPU with its memory) and
# is gated again.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

export NVSHARE_SCHED_MODE=on
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --alloc 32Mi --kernels 2000 --kernel-us 2000
check "holds the lock" wait_log 10 "$SLOG" "LOCK_OK client=1"
kill -KILL "$SCHED_PID"
check "notices the loss" wait_log 10 "$T/A.err" "connection lost"
n1=$(grep -c PROGRESS "$T/A.out"); sleep 0.3; n2=$(grep -c PROGRESS "$T/A.out")
check "keeps running without the scheduler ($n1 -> $n2 kernels)" [ "$n2" -gt "$n1" ]
start_scheduler
check "new scheduler listening" wait_for 10 sh -c "[ \$(grep -c 'listening on .*scheduler.sock' '$SLOG') -ge 2 ]"
check "re-registers (second HELLO)" wait_for 10 sh -c "[ \$(grep -c 'HELLO client=1 ' '$SLOG') -ge 2 ]"
check "re-attaches with its current memory" wait_for 10 sh -c "[ \$(grep -c 'ATTACH_GPU client=1 ' '$SLOG') -ge 2 ] && grep -q 'ATTACH_GPU client=1 .*allocated=32Mi' '$SLOG'"
check "is gated again (LOCK_OK from the new scheduler)" wait_for 10 sh -c "[ \$(grep -c 'LOCK_OK client=1 ' '$SLOG') -ge 2 ]"
app_wait A 30
check "finishes, memory intact" app_ok A
check "exits with status 0 (never crashed)" wait "$PID_A"
finish
