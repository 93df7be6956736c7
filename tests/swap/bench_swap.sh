#!/usr/bin/env bash
# Measurement (not a test): swap strategies on the simulated GPU under real
# (simulated-GPU) memory pressure: NVSHARE_SIM_MEM = capacity = 512Mi, two
# jobs of 336Mi (16+64+256Mi). For each strategy: makespan, hand-offs,
# fault-migrated bytes, bytes evicted by the "driver" (LRU), and the mean
# time a hand-off spent swapping (releaser's swap-out + new holder's
# swap-in, from the counters). docs/swap.md quotes the output.
#   tests/swap/bench_swap.sh [steps]
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/swap_lib.sh"
STEPS=${1:-150}
export NVSHARE_SIM_MEM=512Mi
run() {  # label  NVSHARE_SWAP_OUT  NVSHARE_SWAP
  rm -rf "$NVSHARE_SIM_STATE_DIR" "$NVSHARE_SOCK_DIR" "$T/s.events.jsonl"; mkdir -p "$NVSHARE_SIM_STATE_DIR"
  env NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=512Mi NVSHARE_TQ=50ms NVSHARE_SWAP_OUT="$2" \
    NVSHARE_EVENTS="$T/s.events.jsonl" "$B/nvshare-scheduler" >"$T/s.log" 2>&1 & local sp=$!
  wait_for 5 test -S "$NVSHARE_SOCK_DIR/scheduler.sock"
  env NVSHARE_SWAP="$3" LD_PRELOAD="$PRELOAD" "$SAPP" --name A --ranges "$RANGES" --steps "$STEPS" --kernel-us 2000 --linger-ms 300 >"$T/A.out" 2>&1 & local a=$!
  sleep 0.2
  env NVSHARE_SWAP="$3" LD_PRELOAD="$PRELOAD" "$SAPP" --name B --ranges "$RANGES" --steps "$STEPS" --kernel-us 2000 --linger-ms 300 >"$T/B.out" 2>&1 & local b=$!
  wait_log 120 "$T/B.out" "^DONE"; wait_log 120 "$T/A.out" "^DONE"
  "$B/nvsharectl" --json >"$T/j.json"
  wait "$a" "$b"
  python3 - "$T/j.json" "$T/A.out" "$T/B.out" "$1" "$(NVSHARE_EVENTS=$T/s.events.jsonl count_events lock_ok)" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1])); g = d['gpus'][0]['swap']
def f(p, k): return int(re.search(k + r'=(\d+)', open(p).read()).group(1))
def t(p): return float(re.search(r'elapsed_ms=([\d.]+)', open(p).read()).group(1))
n = max(1, int(sys.argv[5]) - 1)
print("%-28s grants %3s  elapsed A/B %6.0f/%6.0f ms  faulted %5.0f MiB  driver-evicted %5.0f MiB  "
      "swap in %5.0f MiB / out %5.0f MiB  swap time per hand-off %5.1f ms  swap-in %4.1f GB/s" % (
      sys.argv[4], sys.argv[5], t(sys.argv[2]), t(sys.argv[3]),
      (f(sys.argv[2], 'fault_bytes') + f(sys.argv[3], 'fault_bytes')) / 2**20,
      (f(sys.argv[2], 'evicted_bytes') + f(sys.argv[3], 'evicted_bytes')) / 2**20,
      g['bytes_in'] / 2**20, g['bytes_out'] / 2**20, (g['ns_in'] + g['ns_out']) / 1e6 / n,
      g['bytes_in'] / max(1, g['ns_in'])))
PY
  kill "$sp"; wait "$sp" 2>/dev/null
}
run "needed + prefetch (default)" needed 1
run "all + prefetch" all 1
run "none (driver) + prefetch" none 1
run "needed + faults (SWAP=0)" needed 0
run "none + faults (original)" none 0
