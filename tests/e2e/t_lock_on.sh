#!/usr/bin/env bash
# on (anti-thrash) mode with a small time quantum: the holder is asked to
# drop after each quantum, drains and releases; both make progress in turns.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

export NVSHARE_SCHED_MODE=on NVSHARE_TQ=100ms
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
# Their runs overlap however late either started (e2e_lib.sh wait_ready).
app A --alloc 16Mi --kernels 200 --kernel-us 2000 --start-file "$T/go"
app B --alloc 16Mi --kernels 200 --kernel-us 2000 --start-file "$T/go"
wait_ready A B
touch "$T/go"
app_wait A 60; app_wait B 60

check "A finished, memory intact" app_ok A
check "B finished, memory intact" app_ok B
diag "LOCK_OK owners: $(lock_owners)"
alt=$(alternations)
check "LOCK_OK alternates ($alt hand-offs)" [ "$alt" -ge 2 ]
check "quantum expiry sends DROP_LOCK" has_event drop_lock reason='"tq-expired"'
check "holder drains and answers LOCK_RELEASED" has_event lock_released reason='"dropped"'
# Judged on the simulated GPU's kernel timeline: each change of process
# there needs a hand-off of the lock first.
check "the device ran all 400 kernels (A $(kernels_of A), B $(kernels_of B))" \
  [ "$(kernels_of A)" = 200 -a "$(kernels_of B)" = 200 ]
sw=$(kernel_switches)
check "both progress alternately ($sw switches on the device)" [ "$sw" -ge 2 ]
check "never both at once: the device switched processes $sw times for $alt hand-offs" [ "$sw" -le "$alt" ]
# Both finished (DONE above): every release has been answered by now.
check "no revocation" test "$(count_events revoke)" = 0 -a "$(count_events lock_released reason='"revoked"')" = 0
finish
