#!/usr/bin/env bash
# fork() after CUDA init: the child registers as a client of its own (it does
# not use the parent's connection), parent and child take turns on the GPU,
# and the parent's connection survives the child.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

export NVSHARE_SCHED_MODE=on NVSHARE_TQ=100ms
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --alloc 16Mi --kernels 150 --kernel-us 2000 --fork-child-kernels 100
app_wait A 60
check "child finished" grep -qE "^DONE name=A-child .*result=ok" "$T/A.out"
check "parent finished, memory intact, child exited 0" app_ok A
pids=$(event_field pid hello | sort -u | wc -l)
check "parent and child registered separately ($pids pids)" [ "$pids" -eq 2 ]
nh=$(count_events hello)
check "parent did not reconnect ($nh HELLO)" [ "$nh" -eq 2 ]
check "no connection lost" sh -c "! grep -q 'connection lost' '$T/A.err'"
alt=$(alternations)
check "parent and child took turns ($alt hand-offs)" [ "$alt" -ge 1 ]
finish
