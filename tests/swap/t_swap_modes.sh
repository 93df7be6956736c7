#!/usr/bin/env bash
# nvs-test: slow (four full two-job runs, one per swap setting; t_swap_pressure, t_swap_engine and t_swap_idle are the fast tier's swap tests)
# When memory fits nothing swaps, and fresh allocations are prefetched to the
# GPU at allocation time (NVSHARE_PREFETCH_ON_ALLOC=0 turns that off); mode
# on with memory that fits serializes without swapping; NVSHARE_SWAP=0 falls
# back to fault-driven swap-in.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../metrics/metrics_lib.sh"
. "$(dirname "$0")/swap_lib.sh"

# scenario NAME SCHED_ENV... -- CLIENT_ENV... : runs A and B, leaves $T/NAME.*
scenario() {
  local n=$1; shift
  local senv=() cenv=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do senv+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  cenv=("$@")
  rm -rf "$NVSHARE_SIM_STATE_DIR" "$NVSHARE_SOCK_DIR"; mkdir -p "$NVSHARE_SIM_STATE_DIR"
  env "${senv[@]}" NVSHARE_EVENTS="$T/$n.events.jsonl" "$B/nvshare-scheduler" >"$T/$n.sched.log" 2>&1 & local sp=$!
  _pids+=("$sp")
  wait_for 5 test -S "$NVSHARE_SOCK_DIR/scheduler.sock"
  env "${cenv[@]}" LD_PRELOAD="$PRELOAD" "$SAPP" --name A --ranges "$RANGES" --steps "${STEPS:-60}" --kernel-us 2000 >"$T/A.out" 2>"$T/A.err" & local a=$!
  sleep 0.2 # paces the workload (A starts first); no check follows
  env "${cenv[@]}" LD_PRELOAD="$PRELOAD" "$SAPP" --name B --ranges "$RANGES" --steps "${STEPS:-60}" --kernel-us 2000 >"$T/B.out" 2>"$T/B.err" & local b=$!
  wait "$a" "$b"
  cp "$T/A.out" "$T/$n.A"; cp "$T/B.out" "$T/$n.B"
  cp "$T/A.err" "$T/$n.A.err"; cp "$T/B.err" "$T/$n.B.err"
  pflog >"$T/$n.pf"
  kill "$sp"; wait "$sp" 2>/dev/null
}
# ev_in NAME FUNCTION ARGS...: an event helper on scenario NAME's stream.
ev_in() { local n=$1; shift; NVSHARE_EVENTS=$T/$n.events.jsonl "$@"; }
h2d() { awk '$3 >= 0' "$T/$1.pf" | wc -l; }
d2h() { awk '$3 == -1' "$T/$1.pf" | wc -l; }
fb() { grep -oE 'fault_bytes=[0-9]+' "$T/$1.$2" | sed 's/.*=//'; }
ok2() { grep -q 'result=ok' "$T/$1.A" && grep -q 'result=ok' "$T/$1.B"; }

scenario fit NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=2Gi NVSHARE_TQ=50ms
check "fits: both jobs correct" ok2 fit
# (the jobs finished and the scheduler is stopped: its stream is complete)
check "fits: the GPU was never serialized" test "$(ev_in fit count_events gpu_mode serialized=1)" = 0
check "fits: nothing moved to the host ($(d2h fit) D2H prefetches)" [ "$(d2h fit)" -eq 0 ]
check "fits: only the 6 allocation-time prefetches, in allocation order ($(h2d fit))" \
  [ "$(h2d fit)" -eq 6 ] && [ "$(awk '$3 >= 0 { printf "%d,", $5 / 1048576 }' "$T/fit.pf")" = "16,64,256,16,64,256," ]
check "fits: first touches found their ranges resident (faults A $(fb fit A), B $(fb fit B))" \
  [ "$(fb fit A)" = 0 ] && [ "$(fb fit B)" = 0 ]

scenario fit_noprefetch NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=2Gi -- NVSHARE_PREFETCH_ON_ALLOC=0
check "NVSHARE_PREFETCH_ON_ALLOC=0: no prefetch at all ($(h2d fit_noprefetch))" [ "$(h2d fit_noprefetch)" -eq 0 ]
check "NVSHARE_PREFETCH_ON_ALLOC=0: first touches fault (A $(fb fit_noprefetch A) bytes)" [ "$(fb fit_noprefetch A)" -gt 0 ]
check "NVSHARE_PREFETCH_ON_ALLOC=0: both jobs correct" ok2 fit_noprefetch

scenario on_fit NVSHARE_SCHED_MODE=on NVSHARE_GPU_CAPACITY=2Gi NVSHARE_TQ=20ms
check "mode on, memory fits: serialized and handed off" ev_in on_fit has_event drop_lock
check "mode on, memory fits: no swap-out ($(d2h on_fit)), no swap-in beyond allocation ($(h2d on_fit))" \
  [ "$(d2h on_fit)" -eq 0 ] && [ "$(h2d on_fit)" -le 6 ]
check "mode on, memory fits: both jobs correct" ok2 on_fit

# 150 steps: with 60, A could finish inside its first hold when B asked for
# the lock late (seen: 515 ms after serialization), so nothing faulted back.
STEPS=150 scenario noswap NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=512Mi NVSHARE_TQ=50ms -- NVSHARE_SWAP=0
check "NVSHARE_SWAP=0 over capacity: both jobs correct" ok2 noswap
nout=$(d2h noswap)
nin=$(awk '$3 == -1 { s = 1 } s && $3 >= 0' "$T/noswap.pf" | wc -l)
check "NVSHARE_SWAP=0: the releaser still moves what the next needs to the host ($nout)" [ "$nout" -gt 0 ]
check "NVSHARE_SWAP=0: no swap-in prefetch after the first hand-off ($nin)" [ "$nin" -eq 0 ]
check "NVSHARE_SWAP=0: pages fault back in instead (A $(fb noswap A), B $(fb noswap B) bytes)" \
  [ "$(( $(fb noswap A) + $(fb noswap B) ))" -gt 0 ]
if [ "$nout" -eq 0 ] || [ "$(( $(fb noswap A) + $(fb noswap B) ))" -eq 0 ]; then
  # Seen twice in ~25 runs: no hand-off, or no fault-back. Show why.
  diag "noswap scheduler log (no DEBUG lines):"
  grep -v DEBUG "$T/noswap.sched.log" | tail -n 25 | sed 's/^/#   /'
  for x in A B; do diag "noswap $x stderr:"; tail -n 8 "$T/noswap.$x.err" | sed 's/^/#   /'; done
fi
jf() { grep -oE 'elapsed_ms=[0-9.]+' "$T/$1.$2" | sed 's/.*=//'; }
diag "elapsed (ms) A/B: fit $(jf fit A)/$(jf fit B), noswap $(jf noswap A)/$(jf noswap B)"
true
