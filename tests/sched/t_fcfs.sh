#!/usr/bin/env bash
# FCFS: three clients that queue behind a holder get the lock in the order
# they asked; the holder is told how many wait each time it changes.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

start_scheduler --no-nvml --mode on
check "scheduler started" test -S "$NVSHARE_SOCK_DIR/scheduler.sock"

fc A --gpu-uuid GPU-fcfs --script 'lock;hold 600ms;release;hold 300ms'
check "holder got the lock" wait_ev 5 A 'LOCK_OK gpu=0'
for n in B C D; do
  fc $n --gpu-uuid GPU-fcfs --script 'lock;hold 50ms;release'
  # Queue strictly one after another.
  wait_ev 5 $n 'SENT REQ_LOCK'
  wait_event 5 req_lock pid="$(eval echo \$PID_$n)"
done
for n in B C D; do wait_exit 10 "$(eval echo \$PID_$n)"; done
tB=$(ev_time B 'LOCK_OK'); tC=$(ev_time C 'LOCK_OK'); tD=$(ev_time D 'LOCK_OK')
diag "LOCK_OK at B=$tB C=$tC D=$tD"
check "all three waiters got the lock" test -n "$tB" -a -n "$tC" -a -n "$tD"
check "granted in FCFS order B < C < D" test "${tB:-0}" -lt "${tC:-0}" -a "${tC:-0}" -lt "${tD:-0}"
tA=$(ev_time A 'SENT LOCK_RELEASED')
check "first waiter granted only after the holder released" test "${tB:-0}" -gt "${tA:-0}"
check "holder told WAITERS 1, 2, 3" \
  test "$(grep -oE 'WAITERS gpu=0 count=[0-9]+' "$T/A.out" | tr '\n' ' ')" = \
       "WAITERS gpu=0 count=1 WAITERS gpu=0 count=2 WAITERS gpu=0 count=3 "
check "no DROP_LOCK with the default 30 s TQ" test "$(ev_count A DROP_LOCK)" = 0
check "events name lock_ok with client, pid and gpu" \
  has_event lock_ok client='[0-9]+' pid="$PID_B" gpu=0
check "events name req_lock" has_event req_lock client='[0-9]+' pid="$PID_C" gpu=0
check "events name lock_released, released by the holder" \
  has_event lock_released pid="$PID_A" gpu=0 reason='"early"'
check "events: B, C, D granted in that order" \
  test "$(event_field pid lock_ok | tr '\n' ' ')" = "$PID_A $PID_B $PID_C $PID_D "
check "status counts 3 hand-offs" \
  json_has '"handoffs":3'
