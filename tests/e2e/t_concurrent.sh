#!/usr/bin/env bash
# auto mode with memory that fits: both clients run at once, no lock traffic.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

export NVSHARE_SCHED_MODE=auto
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --alloc 16Mi --kernels 400 --kernel-us 1000
app B --alloc 16Mi --kernels 400 --kernel-us 1000
app_wait A 60; app_wait B 60
check "A finished" app_ok A
check "B finished" app_ok B
check "both attached" [ "$(grep -c 'ATTACH_GPU client=' "$SLOG")" -eq 2 ]
check "GPU stayed concurrent" sh -c "! grep -q 'serialized=1' '$SLOG'"
check "no lock traffic" sh -c "! grep -qE 'REQ_LOCK|LOCK_OK|DROP_LOCK' '$SLOG'"
sw=$(switches A B)
check "kernels interleaved ($sw switches)" [ "$sw" -ge 20 ]
finish
