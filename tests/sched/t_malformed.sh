#!/usr/bin/env bash
# Malformed input closes only the offending connection: garbage, bad magic,
# bad version, huge length, unknown type, a truncated frame then close,
# control messages on a client connection, scheduler-only message types,
# a lock request for a GPU not attached, a second HELLO. A holder and a
# waiter running meanwhile are unaffected.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

start_scheduler --no-nvml --mode on
fc H --gpu-uuid GPU-bad --script 'lock;hold 1500ms;release;hold 200ms'
wait_ev 5 H LOCK_OK
fc W --gpu-uuid GPU-bad --script 'lock;hold 50ms;release'

for kind in garbage badmagic badversion hugelen unknown ctl server_type notattached hello2; do
  "$FC" --gpu-uuid GPU-bad --script "raw $kind;wait CLOSED 3s" >"$T/raw_$kind.out" 2>&1
  rc=$?
  check "raw $kind: connection closed by the scheduler" test "$rc" = 0
done
# Truncated frame, then the peer closes: the scheduler just drops it.
"$FC" --gpu-uuid GPU-bad --script "raw trunc;exit" >"$T/raw_trunc.out" 2>&1
check "truncated frame then close: no harm" sched_alive

wait_exit 10 "$PID_H"; rcH=$RC
wait_exit 10 "$PID_W"; rcW=$RC
check "holder unaffected (kept the lock, released normally)" test "$rcH" = 0 -a "$(ev_count H 'CLOSED')" = 0
check "waiter unaffected (got the lock after the holder)" test "$rcW" = 0 -a "$(ev_count W 'LOCK_OK')" = 1
tH=$(ev_time H 'SENT LOCK_RELEASED'); tW=$(ev_time W 'LOCK_OK')
check "waiter's grant came after the holder's release" test "${tW:-0}" -gt "${tH:-0}"
check "scheduler still running and answering" sched_alive
check "malformed frames counted" sh -c "$CTL --json | grep -qE '\"closed_malformed\":[5-9]'"
# Each close is in the event stream with a stable reason (the raw runs
# above waited for CLOSED, so their events are written).
check "events: malformed frames closed (conn_closed reason malformed-frame)" \
  test "$(count_events conn_closed reason='"malformed-frame"')" -ge 5
check "events: REQ_LOCK for a GPU not attached" \
  has_event conn_closed kind='"client"' reason='"gpu-not-attached"'
check "events: control message on a client connection" \
  has_event conn_closed kind='"client"' reason='"control-msg-on-client"'
check "events: a second HELLO" has_event conn_closed reason='"second-hello"'
check "events: a scheduler-only message type" has_event conn_closed reason='"scheduler-only-msg"'

# Without HELLO: a lock request, garbage; on a control connection (it sent
# CTL_STATUS first): a HELLO.
"$FC" --no-hello --script "raw notattached;wait CLOSED 3s" >"$T/pre1.out" 2>&1
check "REQ_LOCK before HELLO closes the connection" test $? = 0
"$FC" --no-hello --script "raw garbage;wait CLOSED 3s" >"$T/pre2.out" 2>&1
check "garbage before HELLO closes the connection" test $? = 0
"$FC" --no-hello --script "raw ctl;wait CTL_REPLY 3s;raw hello2;wait CLOSED 3s" >"$T/pre3.out" 2>&1
check "control connection answered, then closed on a client HELLO" test $? = 0
check "events: client message on a control connection" \
  has_event conn_closed kind='"control"' reason='"client-msg-on-control"'
check "events: message before HELLO" has_event conn_closed kind='"new"' reason='"before-hello"'
check "scheduler still running after all of it" sched_alive
