#!/usr/bin/env bash
# A client killed while it holds the lock: the waiting client proceeds.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

export NVSHARE_SCHED_MODE=on NVSHARE_TQ=30
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --alloc 16Mi --kernels 10000 --kernel-us 2000
wait_log 10 "$SLOG" "LOCK_OK client=1"
app B --alloc 16Mi --kernels 50 --kernel-us 2000
check "B waits behind A" wait_log 10 "$SLOG" "REQ_LOCK client=2 .*holder=1"
check "B makes no progress while A holds" sh -c "sleep 0.3; ! grep -q PROGRESS '$T/B.out'"
kill -KILL "$PID_A"
app_wait B 20
check "holder's death frees the lock" grep -qE "LOCK_RELEASED client=1 .*reason=disconnect" "$SLOG"
check "B got the lock" grep -q "LOCK_OK client=2" "$SLOG"
check "B finished, memory intact" app_ok B
finish
