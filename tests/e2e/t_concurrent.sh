#!/usr/bin/env bash
# auto mode with memory that fits: both clients run at once, no lock traffic.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

export NVSHARE_SCHED_MODE=auto
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
# Their runs overlap however late either started (e2e_lib.sh wait_ready).
app A --alloc 16Mi --kernels 400 --kernel-us 1000 --start-file "$T/go"
app B --alloc 16Mi --kernels 400 --kernel-us 1000 --start-file "$T/go"
wait_ready A B
touch "$T/go"
app_wait A 60; app_wait B 60
check "A finished" app_ok A
check "B finished" app_ok B
# Both finished (DONE above): the whole run is in the event stream.
check "both attached" [ "$(count_events attach)" -eq 2 ]
check "GPU stayed concurrent" [ "$(count_events gpu_mode serialized=1)" -eq 0 ]
check "no lock traffic" \
  [ "$(count_events req_lock)" -eq 0 -a "$(count_events lock_ok)" -eq 0 -a "$(count_events drop_lock)" -eq 0 ]
sw=$(kernel_switches)
check "kernels interleaved on the device ($sw switches)" [ "$sw" -ge 20 ]
finish
