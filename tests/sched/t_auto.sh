#!/usr/bin/env bash
# Mode auto: clients run together while their allocations fit in the GPU's
# capacity, are serialized as soon as they do not, and run together again
# when memory is freed (a client leaves, or MEM_UPDATE shrinks).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

# Capacity = reported total (10Gi) - reserve (0).
start_scheduler --no-nvml --reserve 0
common=(--gpu-uuid GPU-auto --total 10Gi --alloc 4Gi)
fc A "${common[@]}" --script 'wait mode1 10s;lock;mark holding;wait mode0 10s;mem 7Gi;wait mode1 5s;mem 1Gi;wait mode0 5s;hold 100ms'
fc B "${common[@]}" --script 'wait mode1 10s;wait mode0 10s;wait mode1 10s;wait mode0 10s'
check "two clients (8Gi of 10Gi) start concurrent" \
  test "$(ev_time A 'GPU_MODE gpu=0 value=0')" != "" -a "$(ev_time B 'GPU_MODE gpu=0 value=0')" != ""
check "status: not serialized while they fit" json_has '"serialized":false'
check "status: both running" test "$(status_json | grep -o '"state":"running"' | wc -l)" = 2

fc C "${common[@]}" --script 'hold 400ms'
check "a third (12Gi > 10Gi) is told serialized at attach" \
  test "$(ev_time C 'GPU_MODE gpu=0 value=1')" != ""
check "the others switch to serialized" wait_ev 2 A 'GPU_MODE gpu=0 value=1'
wait_ev 2 B 'GPU_MODE gpu=0 value=1'
check "B too" test "$(ev_count B 'GPU_MODE gpu=0 value=1')" = 1
check "serialized client gets the lock" wait_ev 2 A 'LOCK_OK'
check "status: serialized, A holds" sh -c "$CTL --json | grep -q '\"serialized\":true' && $CTL --json | grep -q '\"holder\":{\"client\":1'"
check "switch in the events (12Gi of 10Gi)" \
  has_event gpu_mode gpu=0 serialized=1 mode='"auto"' allocated=$((12 << 30)) capacity=$((10 << 30))

# C leaves: 8Gi fits again -> concurrent, A's lock is dropped silently.
wait_exit 5 "$PID_C"
a_back() { wait_ev 3 A 'MARK holding' && wait_ev 3 A 'GPU_MODE gpu=0 value=0'; }
check "C leaving switches A back to concurrent" a_back
check "and B" wait_ev 3 B 'GPU_MODE gpu=0 value=0'
check "holder and queue cleared" sh -c "$CTL --json | grep -q '\"holder\":null,\"queue\":\[\]'"

# Memory growth and shrink through MEM_UPDATE.
check "MEM_UPDATE 7Gi (11Gi > 10Gi) serializes" wait_ev 3 B 'GPU_MODE gpu=0 value=1.*' 
wait_exit 5 "$PID_A"; rcA=$RC
wait_exit 5 "$PID_B"; rcB=$RC
check "MEM_UPDATE back to 1Gi makes it concurrent again (A rc=$rcA, B rc=$rcB)" test "$rcA" = 0 -a "$rcB" = 0
check "B saw serialized twice and concurrent three times" \
  test "$(ev_count B 'GPU_MODE gpu=0 value=1')" = 2 -a "$(ev_count B 'GPU_MODE gpu=0 value=0')" = 3
check "mode switches counted" json_has '"mode_switches":4'

# Capacity changed at run time with nvsharectl.
fc D --gpu-uuid GPU-auto --total 10Gi --alloc 6Gi --script 'wait mode1 5s;wait mode0 5s'
"$CTL" --capacity 4Gi -g 0 >/dev/null
check "nvsharectl --capacity 4Gi serializes a 6Gi client" wait_ev 3 D 'GPU_MODE gpu=0 value=1'
"$CTL" --capacity auto >/dev/null
check "--capacity auto (10Gi) makes it concurrent again" wait_ev 3 D 'GPU_MODE gpu=0 value=0'
"$CTL" -S on >/dev/null
fc E --gpu-uuid GPU-auto --total 10Gi --alloc 1Gi --script 'hold 10ms'
check "mode on serializes even when memory fits" test "$(ev_count E 'GPU_MODE gpu=0 value=1')" = 1
"$CTL" -S off >/dev/null
fc F --gpu-uuid GPU-auto --total 10Gi --alloc 20Gi --script 'hold 10ms'
check "mode off never serializes" test "$(ev_count F 'GPU_MODE gpu=0 value=0')" = 1

# The holder leaves and its memory makes the GPU fit again: the waiter is
# told "concurrent" (GPU_MODE 0), not handed a lock it no longer needs.
"$CTL" -S auto >/dev/null
fc G --gpu-uuid GPU-auto2 --total 10Gi --alloc 6Gi --script 'wait mode1 5s;lock;hold 300ms'
fc H --gpu-uuid GPU-auto2 --total 10Gi --alloc 6Gi --script 'hold 100ms;lock;hold 100ms'
wait_exit 5 "$PID_H"
check "waiter of a departed holder gets GPU_MODE 0 and no LOCK_OK" \
  test "$(ev_count H 'GPU_MODE gpu=0 value=0')" = 1 -a "$(ev_count H 'LOCK_OK')" = 0 -a "$(ev_count G 'LOCK_OK')" = 1
