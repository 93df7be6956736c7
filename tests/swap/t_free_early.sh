#!/usr/bin/env bash
# A free of managed memory is counted before the driver frees it, so a
# client waiting for that room goes on while the free is still running (an
# H200 frees managed memory at ~7 ms per GiB; a job's end is a hand-off, and
# the pressure benchmark's next job started that much later per freed GiB).
# Mode auto, capacity 512Mi: A (256Mi) holds the lock and never releases idle,
# B (320Mi) asks and waits. A finishes and frees its 256Mi, and the simulated
# driver keeps that free from returning until the test says so
# (NVSHARE_SIM_FREE_GATE). Asserted while A is still inside the free: the
# scheduler counts A's memory as gone, the GPU turned concurrent and B ran its
# steps to the end. Only then is A's free let through. Then a free the driver
# refuses (C's, during a stream capture) counts the memory again.
# shellcheck disable=SC1091,SC2034,SC2154 # libs by path; RANGES is read by swap_lib.sh's job(); lib variables
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../metrics/metrics_lib.sh"
. "$(dirname "$0")/swap_lib.sh"

# TQ beyond the gate's 30 s: no quantum's end can let B in instead.
export NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=512Mi NVSHARE_TQ=120s
start_scheduler --no-nvml || { not_ok "scheduler starts"; exit 1; }
RANGES=256Mi
NVSHARE_SIM_FREE_GATE=$T/gate NVSHARE_IDLE_RELEASE_MS=60000 \
  job A --steps 20 --kernel-us 2000 --start-file "$T/goA" --free-at-end --end-file "$T/end"
wait_log 20 "$T/A.out" "^READY name=A" || not_ok "A allocated and filled"
RANGES=256Mi,64Mi
job B --steps 5 --kernel-us 2000 --start-file "$T/goB"
wait_log 20 "$T/B.out" "^READY name=B" || not_ok "B allocated and filled"
pa=$(event_field pid hello client=1 | head -1)
pb=$(event_field pid hello client=2 | head -1)
touch "$T/goA"
check "A runs its steps" wait_log 20 "$T/A.out" "^RUNNING name=A"
touch "$T/goB"
check "B asks for the lock while A holds it" wait_event 20 req_lock pid="$pb" holder=1
# Counted while A holds and B waits: the GPU turns concurrent again only
# when A's memory goes.
n0=$(count_events gpu_mode gpu=0 serialized=0) nb0=$(count_events lock_ok pid="$pb")
check "A finished its steps" wait_log 60 "$T/A.out" "^DONE name=A "
# counted PID: the bytes the scheduler counts for that client on its GPU.
counted() {
  status_py "[g['allocated'] for c in d['clients'] if c['pid'] == $1 for g in c['gpus']][0]"
}
a_gone() { [ "$(counted "$pa")" = 0 ]; }
check "A's 256Mi counted free while its free has not returned" wait_for 20 a_gone
more_concurrent() { [ "$(count_events gpu_mode gpu=0 serialized=0)" -gt "$n0" ]; }
check "the GPU turned concurrent meanwhile" wait_for 10 more_concurrent
check "B ran its steps to the end meanwhile" job_wait B 20
check "... let in by that switch, not by a grant" test "$(count_events lock_ok pid="$pb")" = "$nb0"
check "... and A is still inside the driver's free" bash -c "! grep -q '^FREED name=A' '$T/A.out'"
touch "$T/gate"
check "A's free returned once let through" wait_log 20 "$T/A.out" "^FREED name=A"
check "A is counted at 0 after its free" a_gone
touch "$T/end"
check "A's data was intact" job_ok A
check "B finished, every byte intact" job_ok B

# A free the driver refuses (during a capture in global mode, a free
# synchronizes) leaves the memory allocated: it is counted again.
RANGES=256Mi
job C --steps 2 --kernel-us 500 --capture-free --end-file "$T/endC"
check "C finished" job_wait C 30
check "C's free during its capture was refused (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)" \
  grep -q '^CAPFREE name=C rc=900' "$T/C.out"
check "... its range lived on, every byte intact" job_ok C
pc=$(event_field pid hello client=3 | head -1)
c_full() { [ "$(counted "$pc")" = $((256 << 20)) ]; }
check "... and is counted again: 256Mi" wait_for 20 c_full
touch "$T/endC"
echo "1..$_tap_n"
