#!/usr/bin/env bash
# A waiter let in by a switch to concurrent is admitted like a grant: its
# memory comes in before its gate opens, so its first kernels fault nothing
# in. Mode auto, capacity 512Mi, TQ too long to end, two jobs of 320 MiB
# (256Mi + 64Mi) on the prefetch path (a swap-out leaves memory on the host
# for the driver to fault back, as UM eviction and memory allocated while
# serialized do on a GPU):
#   A and B allocate and fill (taking turns); A runs its steps holding the
#   lock (it never releases idle: NVSHARE_IDLE_RELEASE_MS is long), B asks
#   and waits; A finishes, frees its memory and lives on (as the benchmark's
#   worker processes do between jobs): the 320 MiB left fit, the GPU turns
#   concurrent and B goes on without a LOCK_OK. What A's swap-in had moved
#   of B to the host is prefetched back before B's first step: B's fault
#   bytes are 0. (Before, B faulted it in page by page: on an H200 676 MiB
#   took ~40 ms so, against 15 ms by prefetch; issue 32.)
# shellcheck disable=SC1091,SC2034,SC2154 # libs by path; RANGES is read by swap_lib.sh's job(); lib variables
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../metrics/metrics_lib.sh"
. "$(dirname "$0")/swap_lib.sh"

export NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=512Mi NVSHARE_TQ=30s
export NVSHARE_SWAP_FAST=0
RANGES=256Mi,64Mi
start_scheduler --no-nvml || { not_ok "scheduler starts"; exit 1; }
NVSHARE_IDLE_RELEASE_MS=60000 job A --steps 20 --kernel-us 2000 --start-file "$T/goA" \
  --free-at-end --end-file "$T/end"
wait_log 20 "$T/A.out" "^READY name=A" || not_ok "A allocated and filled"
job B --steps 5 --kernel-us 2000 --start-file "$T/goB"
wait_log 20 "$T/B.out" "^READY name=B" || not_ok "B allocated and filled"
pid_of() { event_field pid hello client="$1" | head -1; }
pa=$(pid_of 1) pb=$(pid_of 2)
touch "$T/goA"
check "A runs its steps" wait_log 20 "$T/A.out" "^RUNNING name=A"
a_holds() { [ "$(status_py "(d['gpus'][0]['holder'] or {}).get('pid')")" = "$pa" ]; }
check "... holding the lock" a_holds
n0=$(count_events lock_ok pid="$pb")
touch "$T/goB"
check "B asks for the lock while A holds it" wait_event 20 req_lock pid="$pb" holder=1
check "A finished its steps and freed its memory" wait_log 60 "$T/A.out" "^FREED name=A"
job_wait B 60
touch "$T/end"
check "A's data was intact" job_ok A
check "B finished, every byte intact" job_ok B
check "the GPU turned concurrent when A freed its memory" wait_event 10 gpu_mode gpu=0 serialized=0
n1=$(count_events lock_ok pid="$pb")
check "B was let in by that switch, not by a grant (its LOCK_OKs: $n0 before, $n1 after)" \
  test "$n1" = "$n0"
fb=$(jfield B fault_bytes)
check "B's memory came in before its first step: no fault migration (B $fb bytes)" [ "$fb" = 0 ]
echo "1..$_tap_n"
