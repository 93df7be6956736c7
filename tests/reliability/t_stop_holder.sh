#!/usr/bin/env bash
# A lock holder that stops (SIGSTOP) with the REAL libnvshare + sim_app: the
# scheduler revokes it after TQ + grace, the waiter proceeds, the revocation
# is logged and counted (status JSON, metrics read the same counters); on
# SIGCONT the stopped application asks again, gets the lock and finishes its
# work correctly (sim_app checks its memory). A holder that ignores
# DROP_LOCK while running is tests/sched/t_revoke.sh (fake client).
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/e2e/e2e_lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"

# No idle release: A must hold the lock until it is stopped, and a
# CPU-starved A that launched nothing for a while went idle and handed B
# the lock before the stop (an ASan soak round), so it was never revoked.
export NVSHARE_SCHED_MODE=on NVSHARE_IDLE_RELEASE_MS=0
# The quantum is long until A is stopped, then 200 ms (nvsharectl -T applies
# to the current quantum): the DROP_LOCK can only come after the stop. With
# a 200 ms quantum from the start, a stop that took longer than that under
# load (sim_stop retries while A holds the simulator's lock) let the running
# A answer the DROP_LOCK itself (an ASan soak round): no revocation.
start_scheduler --no-nvml --tq 30 --drop-grace-ms 500 || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --alloc 16Mi --kernels 1500 --kernel-us 2000
check "A holds the lock" wait_event 10 lock_ok client=1
app B --alloc 16Mi --kernels 100 --kernel-us 2000
check "B waits behind A" wait_event 10 req_lock client=2 holder=1
# Stopped outside the simulated GPU's cross-process state lock: a plain
# SIGSTOP inside it stopped B as well (an ASan soak round: B got the lock
# and ran nothing for 20 s), which no real GPU does (tests/sim/README.md).
"$B/tests/sim/sim_stop" "$PID_A" >/dev/null || not_ok "A stops outside the simulator's lock"
t_stop=$(date +%s%N)
check "no DROP_LOCK before the stop (quantum 30 s)" sh -c "! grep -qE '$(evpat drop_lock client=1)' '$NVSHARE_EVENTS'"
"$CTL" -T 0.2 >/dev/null
check "A (stopped) is asked to drop after the quantum" wait_event 5 drop_lock client=1 reason='"tq-expired"'
check "A is revoked after the grace" wait_event 5 revoke client=1 pid="$PID_A" gpu=0
check "B gets the lock" wait_event 5 lock_ok client=2
t_b=$(date +%s%N)
diag "SIGSTOP -> B's LOCK_OK seen: $(( (t_b - t_stop) / 1000000 )) ms (TQ 200 once stopped + grace 500)"
check "B finishes while A is stopped" app_wait B 20
check "B's memory intact" app_ok B
check "revocation counted in the status (GPU and client)" \
  sh -c "$CTL --json | grep -o '\"revocations\":1' | wc -l | grep -qv '^0$'"
check "holder stats show the revocation for A's client" \
  sh -c "$CTL --json | grep -qE '\"pid\":$PID_A,.*\"revocations\":1'"
n_before=$(grep -c PROGRESS "$T/A.out")
kill -CONT "$PID_A"
asked_again() { has_event req_lock client=1 && [ "$(count_events lock_ok client=1)" -ge 2 ]; }
check "A asks again after SIGCONT" wait_for 10 asked_again
check "A finishes" app_wait A 30
check "A's work is complete and its memory intact" app_ok A
check "A exits 0" wait "$PID_A"
n_after=$(grep -c PROGRESS "$T/A.out")
diag "A: $n_before kernels before SIGCONT, $n_after in all"
check "A did all 1500 kernels" [ "$n_after" = 1500 ]
# A's connection ended (bye) after every message it sent.
wait_event 5 bye client=1
check "A's late LOCK_RELEASED was ignored" has_event lock_release_ignored client=1 reason='"not-holder"'
during_b=$(sed -nE "/$(evpat lock_ok client=2)/,/$(evpat lock_released client=2)/p" "$NVSHARE_EVENTS" |
  grep -cE "$(evpat lock_ok client=1)")
check "A never got the lock while B held it" [ "$during_b" = 0 ]
check "scheduler healthy" sched_alive
finish
