#!/usr/bin/env bash
# Device-memory clients (HELLO flag NVS_HELLO_DEVICE_MEMORY, set by
# NVSHARE_UNIFIED_MEMORY=0; docs/scheduler.md "Device-memory clients"): their
# memory cannot be swapped, so the scheduler never asks them to move memory
# out (no SWAP_HINT, no DROP_LOCK with SWAP_OUT) and counts their memory as
# on the GPU even while they idle (a co-scheduling set does not form on top
# of it). Each case runs beside a control GPU whose client lacks the flag,
# so every "did not happen" has its "happens without the flag".
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

client_id() { grep -oE 'WELCOME id=[0-9]+' "$T/$1.out" | head -1 | cut -d= -f2; }
# first_role ID: the role of client ID's first lock_ok.
first_role() { event_field role lock_ok client="$1" | head -1; }
# line_of EVENT [FIELD=VALUE]...: line number of the first such event.
line_of() { grep -nE "$(evpat "$@")" "$NVSHARE_EVENTS" | head -1 | cut -d: -f1; }

start_scheduler --no-nvml --capacity 1Gi --tq 300ms

# ---- 1. Never asked to move memory out ----
# 600Mi + 600Mi on 1Gi: serialized. The first holder (device memory on
# GPU-dm, plain on GPU-um) holds until dropped; the second asks for the lock.
for v in dm um; do
  flag=(); [ $v = dm ] && flag=(--hello-flag device-memory)
  u=(--gpu-uuid "GPU-$v" --total 16Gi --alloc 600Mi --hello-flag swap-hint)
  fc H$v "${u[@]}" "${flag[@]}" --script "until $T/start-$v;lock;mark held;until $T/end"
  fc W$v "${u[@]}" --script "until $T/next-$v;lock;mark held;until $T/end"
  wait_ev 10 W$v 'GPU_MODE gpu=0 value=1' # 1200Mi of 1Gi: serialized
  touch "$T/start-$v"
  wait_ev 10 H$v 'MARK held'
  touch "$T/next-$v"
done
hdm=$(client_id Hdm); hum=$(client_id Hum)
# dev_mem ID: the status's device_memory of client ID.
dev_mem() { "$CTL" --json | jq -r --argjson id "$1" '.clients[] | select(.id == $id) | .device_memory'; }
check "status: the device-memory client is flagged" test "$(dev_mem "$hdm")" = true
check "status: the plain client is not" test "$(dev_mem "$hum")" = false
# Each waiter gets the lock once the TQ drops its holder: the positive
# marker after which the holder's hints and drops are all on the stream.
check "device memory: the waiter got the lock after the quantum" wait_ev 10 Wdm 'MARK held'
check "control: the waiter got the lock after the quantum" wait_ev 10 Wum 'MARK held'
check "control: the plain holder was sent a SWAP_HINT" has_event swap_hint client="$hum"
check "device memory: no SWAP_HINT to the device-memory holder" \
  test "$(count_events swap_hint client="$hdm")" = 0
# DROP_LOCK flags: 0x2 SWAP_OUT, MiB from bit 8 (protocol.h).
drop_flags() { grep -oE 'DROP_LOCK gpu=0 flags=[0-9]+' "$T/$1.out" | head -1 | cut -d= -f3; }
fum=$(drop_flags Hum); fdm=$(drop_flags Hdm)
diag "DROP_LOCK flags: plain holder $fum, device-memory holder $fdm"
check "control: the plain holder's DROP_LOCK asks for a swap-out of 176 MiB (600 - (1024 - 600))" \
  test $(( ${fum:-0} & 2 )) = 2 -a $(( ${fum:-0} >> 8 )) = 176
check "device memory: its DROP_LOCK asks for none" test "${fdm:-x}" = 0
check "device memory: its release moved nothing" \
  test "$(event_field moved_mib lock_released client="$hdm" | head -1)" = 0
touch "$T/end"
for n in Hdm Hum Wdm Wum; do eval "wait_exit 10 \$PID_$n"; done

# ---- 2. An idle device-memory client's memory still counts ----
# 600Mi idle + 300Mi + 300Mi on 1Gi. Plain, the idle client's memory may be
# moved out and the two 300Mi clients run together (guest); device memory
# stays, so they take turns.
for v in dm2 um2; do
  flag=(); [ $v = dm2 ] && flag=(--hello-flag device-memory)
  u=(--gpu-uuid "GPU-$v" --total 16Gi)
  fc I$v "${u[@]}" --alloc 600Mi "${flag[@]}" --script "until $T/end2"
  fc A$v "${u[@]}" --alloc 300Mi --script "until $T/start-$v;lock;mark held;until $T/go-$v;release;until $T/end2"
  fc B$v "${u[@]}" --alloc 300Mi --script "until $T/next-$v;lock;mark held;until $T/end2"
  # 1200Mi of 1Gi: serialized before anyone asks for the lock.
  wait_ev 10 B$v 'GPU_MODE gpu=0 value=1'
  touch "$T/start-$v"
  wait_ev 10 A$v 'MARK held'
  touch "$T/next-$v"
done
bdm=$(client_id Bdm2); bum=$(client_id Bum2); adm=$(client_id Adm2)
check "control: the second client runs as a guest beside the first" wait_ev 10 Bum2 'MARK held'
check "control: ... role guest" test "$(first_role "$bum")" = guest
check "device memory: the second client asked for the lock" wait_event 10 req_lock client="$bdm"
touch "$T/go-dm2" # the first one releases: the positive marker
check "device memory: the second client got the lock" wait_ev 10 Bdm2 'MARK held'
check "device memory: ... as the primary, not a guest" test "$(first_role "$bdm")" = primary
rel=$(line_of lock_released client="$adm"); got=$(line_of lock_ok client="$bdm")
check "device memory: ... only after the first released ($rel < $got)" test "${rel:-0}" -gt 0 -a "${rel:-0}" -lt "${got:-0}"
touch "$T/end2" "$T/go-um2"
check "no revocation" test "$(count_events revoke)" = 0
check "scheduler alive" sched_alive
