#!/usr/bin/env bash
# on (anti-thrash) mode with a small time quantum: the holder is asked to
# drop after each quantum, drains and releases; both make progress in turns.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

export NVSHARE_SCHED_MODE=on NVSHARE_TQ=100ms
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --alloc 16Mi --kernels 200 --kernel-us 2000
app B --alloc 16Mi --kernels 200 --kernel-us 2000
app_wait A 60; app_wait B 60

check "A finished, memory intact" app_ok A
check "B finished, memory intact" app_ok B
diag "LOCK_OK owners: $(lock_owners)"
alt=$(alternations)
check "LOCK_OK alternates ($alt hand-offs)" [ "$alt" -ge 2 ]
check "quantum expiry sends DROP_LOCK" has_event drop_lock reason='"tq-expired"'
check "holder drains and answers LOCK_RELEASED" has_event lock_released reason='"dropped"'
sw=$(switches A B)
check "both progress alternately ($sw switches)" [ "$sw" -ge 2 ]
nlock=$(count_events lock_ok)
check "never both at once ($sw switches for $nlock grants)" [ "$sw" -le $((nlock + 2)) ]
# Both finished (DONE above): every release has been answered by now.
check "no revocation" test "$(count_events revoke)" = 0 -a "$(count_events lock_released reason='"revoked"')" = 0
finish
