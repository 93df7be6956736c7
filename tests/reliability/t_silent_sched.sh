#!/usr/bin/env bash
# A scheduler that stops answering must not hang the application
# (docs/client-lock.md "A scheduler that stops answering"): a client waiting
# for the lock pings, and after NVSHARE_SCHED_TIMEOUT without an answer runs
# ungated, warns once, finishes with correct results, and registers again
# when the scheduler answers; the run without the gate is then reported to
# the scheduler (status, event, metrics: issue 31 item 2). A scheduler
# flooding DROP_LOCK does not flood the application's stderr. (Schedulers
# that misbehave on purpose: tests/security/t_hostile_sched.sh.)
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../e2e/e2e_lib.sh"
FAKE=$NVS_ROOT/tests/reliability/fake_sched.py
export NVSHARE_SCHED_TIMEOUT=1

# 1. The real scheduler, stopped (SIGSTOP) while B waits behind A. A never
# releases for idleness (a CPU-starved A would go idle and hand B the lock).
export NVSHARE_SCHED_MODE=on NVSHARE_TQ=30 NVSHARE_IDLE_RELEASE_MS=0
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --alloc 16Mi --kernels 100000 --kernel-us 2000
wait_event 10 lock_ok pid="$PID_A"
app B --alloc 16Mi --kernels 400 --kernel-us 2000
check "B waits behind A" wait_event 10 req_lock pid="$PID_B"
# While the scheduler answers, B keeps waiting: three pings answered (3 s
# of waiting, longer than the timeout), no progress, no warning.
check "B's pings are answered" wait_events 10 3 ping pid="$PID_B"
check "... and B still waits, without a warning" \
  test "$(grep -c '^PROGRESS name=B' "$T/B.out")" = 0 -a "$(grep -c 'no answer' "$T/B.err")" = 0
# Stopped outside the simulated GPU's state lock (its NVML calls take it):
# stopped inside it, it would stop B too (tests/sim/README.md).
"$B/tests/sim/sim_stop" "$SCHED_PID" >/dev/null || not_ok "the scheduler stops outside the simulator's lock"
stopped=$(date +%s%N)
check "B runs ungated once the scheduler stopped answering" wait_log 10 "$T/B.out" "^PROGRESS name=B "
ran=$(date +%s%N)
diag "B ran $(( (ran - stopped) / 1000000 )) ms after SIGSTOP (NVSHARE_SCHED_TIMEOUT=1)"
silence=$(grep -oE 'no answer to a ping for [0-9.]+ s' "$T/B.err" | grep -oE '[0-9.]+' | head -1)
# Not before the timeout (a late thread only lengthens the silence); after
# it, within a hang guard: the client's own ping period sets how much later
# (under 1 s on a quiet machine), which a loaded machine stretches.
guard=$(( 1 + $(scaled 10) ))
check "B gave up after the timeout, not before (${silence:-?} s of silence; hang guard ${guard} s)" \
  awk -v s="${silence:-99}" -v g="$guard" 'BEGIN { exit !(s >= 1 && s < g) }'
check "one warning, naming NVSHARE_SCHED_TIMEOUT" \
  test "$(grep -c 'NVSHARE_SCHED_TIMEOUT' "$T/B.err")" = 1
n_hello=$(count_events hello pid="$PID_B")
kill -CONT "$SCHED_PID"
check "B registers again once the scheduler answers" \
  wait_events 10 $((n_hello + 1)) hello pid="$PID_B"
check "... and is gated again (waits behind A)" \
  wait_events 10 2 req_lock pid="$PID_B"
check "... and reports its run without the gate (ungated event, ping-timeout, 1 run)" \
  wait_event 10 ungated pid="$PID_B" reason='"ping-timeout"' runs=1
ung() { "$B/nvsharectl" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["ungated"]["ping-timeout"]["runs"], [c["ungated"]["runs"] for c in j["clients"] if c["pid"]==int(sys.argv[1])])' "$PID_B"; }
check "... counted in the status (scheduler-wide and B's own)" test "$(ung)" = "1 [1]"
kill -KILL "$PID_A"
check "B finishes" app_wait B 30
check "B's results are correct" app_ok B
wait "$PID_B"
check "B exits 0" test $? = 0
kill -TERM "$SCHED_PID"
wait "$SCHED_PID" 2>/dev/null

# 2. A scheduler that says "serialized" and never grants nor answers.
against_fake silent C 'no answer to a ping' "told serialized and never granted"
silence=$(grep -oE 'no answer to a ping for [0-9.]+ s' "$T/C.err" | grep -oE '[0-9.]+' | head -1)
check "C ran ungated after the timeout, not before (${silence:-?} s of silence; hang guard ${guard} s)" \
  awk -v s="${silence:-99}" -v g="$guard" 'BEGIN { exit !(s >= 1 && s < g) }'

# 3. A DROP_LOCK flood: the application's stderr stays short.
rm -f "$NVSHARE_SOCK_DIR/scheduler.sock"
bg python3 "$FAKE" "$NVSHARE_SOCK_DIR/scheduler.sock" dropflood --ready "$T/fake2"
wait_for 5 test -e "$T/fake2"
app D --alloc 16Mi --kernels 20000 --kernel-us 10
check "the flood was sent (2000 grants, each revoked at once)" wait_for 20 test -e "$T/fake2.flooded"
check "D finishes" app_wait D 20
check "D's results are correct" app_ok D
nrev=$(grep -c 'lock revoked' "$T/D.err")
check "2000 revocations, one warning line ($nrev)" test "$nrev" = 1
finish
