#!/usr/bin/env bash
# A holder that ignores DROP_LOCK is revoked after the grace period: the
# DROP is resent once, the holder gets DROP_LOCK(grace 0), the waiter gets
# the lock, the revoked client's late LOCK_RELEASED is ignored, and it can
# queue again.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

start_scheduler --no-nvml --mode on --tq 100ms --drop-grace-ms 400
# A ignores DROP_LOCK; once revoked it sends its (late) LOCK_RELEASED and
# queues again.
fc A --ignore-drop --gpu-uuid GPU-rv --script 'lock;wait revoked 5s;release;lock;release;hold 100ms'
wait_ev 5 A 'LOCK_OK'
fc B --gpu-uuid GPU-rv --script 'lock;hold 300ms;release;hold 200ms'
wait_ev 5 B 'LOCK_OK'
wait_exit 10 "$PID_B"
t_drop=$(ev_time A 'DROP_LOCK gpu=0 flags=[0-9]+ grace_ms=400')
t_resend=$(ev_time A 'DROP_LOCK' 2)
t_rev=$(ev_time A 'DROP_LOCK gpu=0 flags=[0-9]+ grace_ms=0')
t_b=$(ev_time B 'LOCK_OK')
diag "DROP at $t_drop, resend at $t_resend, revoked at $t_rev, B LOCK_OK at $t_b"
check "holder got DROP_LOCK with grace 400 ms" test -n "$t_drop"
r=$(ms_between "${t_drop:-0}" "${t_resend:-0}")
check "DROP_LOCK resent at half the grace (got $r ms)" test "$r" -ge 180 -a "$r" -le 320
check "holder told it was revoked (DROP_LOCK grace 0)" test -n "$t_rev"
g=$(ms_between "${t_drop:-0}" "${t_b:-0}")
check "waiter got the lock when the grace ran out (${g} ms after DROP)" test "$g" -ge 390 -a "$g" -le 600
check "revocation in the events" has_event revoke client=1 pid="$PID_A" gpu=0 grace_ms=400
check "... and the lock released as revoked" has_event lock_released pid="$PID_A" reason='"revoked"'
check "status counts one revocation" json_has '"revocations":1'

wait_exit 5 "$PID_A"
check "revoked client's late LOCK_RELEASED is ignored" \
  has_event lock_release_ignored client=1 pid="$PID_A" gpu=0 reason='"not-holder"'
check "revoked client queued again and got the lock after the waiter" \
  test "$(ev_count A 'LOCK_OK')" = 2 -a "$RC" = 0
check "scheduler still healthy" sched_alive
