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
# When the resend and the revocation come (half the grace, its end) is the
# core's, in virtual time (tests/core/t_lock.c test_lock_turns); here their
# order and what the messages say. They were judged by the clients' own
# stamps: 180-320 ms and 390-600 ms.
diag "as A and B saw it: resend $(ms_between "${t_drop:-0}" "${t_resend:-0}") ms, B's grant $(ms_between "${t_drop:-0}" "${t_b:-0}") ms after the DROP"
check "holder got DROP_LOCK with grace 400 ms" test -n "$t_drop"
left=$(awk '/DROP_LOCK/ && ++n == 2 { for (i = 1; i <= NF; i++) if ($i ~ /^grace_ms=/) { sub("grace_ms=", "", $i); print $i } }' "$T/A.out")
check "DROP_LOCK resent once before the revocation, with what is left of the grace (${left:-none} of 400 ms)" \
  test -n "$t_resend" -a -n "$t_rev" -a "${t_resend:-0}" -lt "${t_rev:-0}" -a "${left:-0}" -gt 0 -a "${left:-400}" -lt 400
check "holder told it was revoked (DROP_LOCK grace 0)" test -n "$t_rev"
# The scheduler's own order: the revocation, then the waiter's grant.
revoked_then_granted() {
  awk '/"event":"revoke"/ && /"client":1,/ && !r { r = NR } /"event":"lock_ok"/ && /"client":2,/ && !b { b = NR }
    END { exit !(r && b && b > r) }' "$NVSHARE_EVENTS"
}
check "the waiter got the lock once the holder was revoked (revoke, then B's lock_ok)" revoked_then_granted
check "revocation in the events" has_event revoke client=1 pid="$PID_A" gpu=0 grace_ms=400
check "... and the lock released as revoked" has_event lock_released pid="$PID_A" reason='"revoked"'
check "status counts one revocation" json_has '"revocations":1'

wait_exit 5 "$PID_A"
check "revoked client's late LOCK_RELEASED is ignored" \
  has_event lock_release_ignored client=1 pid="$PID_A" gpu=0 reason='"not-holder"'
check "revoked client queued again and got the lock after the waiter" \
  test "$(ev_count A 'LOCK_OK')" = 2 -a "$RC" = 0
check "scheduler still healthy" sched_alive
