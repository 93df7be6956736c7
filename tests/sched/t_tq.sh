#!/usr/bin/env bash
# Time quantum: with TQ 300 ms two busy clients alternate (DROP_LOCK after
# the quantum, re-queue at the tail); a lone client is never interrupted;
# nvsharectl -T takes fractional seconds.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

NVSHARE_TQ=300ms start_scheduler --no-nvml --mode on
check "scheduler started with NVSHARE_TQ=300ms" json_has '"tq_ms":300'

fc A --gpu-uuid GPU-tq --script 'work 1200ms'
wait_ev 5 A 'LOCK_OK'
fc B --gpu-uuid GPU-tq --script 'work 1200ms'
wait_exit 20 "$PID_A"; rcA=$RC
wait_exit 20 "$PID_B"; rcB=$RC
check "both clients finished their work" test "$rcA" = 0 -a "$rcB" = 0
dA=$(ev_count A 'DROP_LOCK gpu=0'); okB=$(ev_count B 'LOCK_OK')
diag "A got $dA DROP_LOCK, B got $okB LOCK_OK"
check "A was asked to drop at least twice" test "$dA" -ge 2
check "B got the lock at least twice (round robin)" test "$okB" -ge 2
t_ok=$(ev_time A 'LOCK_OK'); t_drop=$(ev_time A 'DROP_LOCK')
diag "first quantum as A saw it: $(ms_between "$t_ok" "$t_drop") ms"
# The quantum's length (DROP_LOCK exactly at grant + TQ) is the core's, in
# virtual time (tests/core/t_lock.c test_lock_turns); here: the setting
# reaches the grants. It was judged by A's own stamps, 290-450 ms.
check "grants carry the quantum in force (lock_ok quantum_ms=300)" has_event lock_ok quantum_ms=300
# Grants alternate between the two clients.
seq=$(event_field client lock_ok | tr '\n' ' ')
diag "grant order: $seq"
alt=$(echo "$seq" | awk '{ for (i = 2; i <= NF; i++) if ($i == $(i-1)) bad=1; print bad ? "no" : "yes" }')
check "grants alternate A, B, A, B..." test "$alt" = yes
check "drops carry reason tq-expired" has_event drop_lock gpu=0 reason='"tq-expired"'

# A lone client keeps the lock past any number of quanta.
fc L --gpu-uuid GPU-tq --script 'work 900ms'
wait_exit 10 "$PID_L"
check "lone client: no DROP_LOCK over 3 quanta" test "$(ev_count L DROP_LOCK)" = 0
check "lone client: one LOCK_OK" test "$(ev_count L LOCK_OK)" = 1

# nvsharectl -T with fractional seconds.
out=$("$CTL" -T 0.2 2>&1); rc=$?
diag "$out"
check "nvsharectl -T 0.2 accepted" test "$rc" = 0
check "status shows tq_ms 200" json_has '"tq_ms":200'
check "nvsharectl -T 0 rejected as usage error" sh -c '"$0" -T 0 >/dev/null 2>&1; test $? = 2' "$CTL"
fc C --gpu-uuid GPU-tq --script 'work 600ms'
wait_ev 5 C 'LOCK_OK'
fc D --gpu-uuid GPU-tq --script 'work 600ms'
wait_exit 10 "$PID_C"; wait_exit 10 "$PID_D"
t_ok=$(ev_time C 'LOCK_OK'); t_drop=$(ev_time C 'DROP_LOCK')
diag "first quantum as C saw it: $(ms_between "$t_ok" "${t_drop:-0}") ms"
check "new TQ used: C and D's grants carry quantum_ms=200, and C was asked to drop" \
  sh -c "[ \"\$(grep -cE '$(evpat lock_ok quantum_ms=200)' '$NVSHARE_EVENTS')\" -ge 2 ] && [ -n '$t_drop' ]"
