#!/usr/bin/env bash
# nvs-test: slow (two runs of 150 steps swapping 336 MiB jobs; t_swap_pressure is the fast tier's swap test)
# The fast path under memory pressure (docs/swap.md "The swap engine"): two
# jobs of 336 MiB (three converted ranges each) at a capacity of 512 MiB take
# turns; every swap goes by copy to pinned staging and discard (no Unified
# Memory prefetch to the host at all), every swap-in copies back before the
# first kernel (no fault migration), nothing reads a discarded page (no
# stray access), and every byte survives. Then the same in trap mode
# (NVSHARE_SWAP_TRAP=1): swapped-out memory is unmapped, so a kernel that
# reached the GPU while its job was out would fail the job. The status and
# /metrics show the paths and the staging.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../metrics/metrics_lib.sh"
. "$(dirname "$0")/swap_lib.sh"

# TQ 200 ms: the jobs (~0.9 s of kernels each) take turns several times.
export NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=512Mi NVSHARE_TQ=200ms
start_metrics_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
hg=$(scaled 60)

# staged_all MIB: every swap_app client holds MIB of staging.
staged_all() {
  [ "$(status_py "sorted(set(g['swap']['staging_bytes'] >> 20 for c in d['clients'] if c['claimed_name'] == 'swap_app' for g in c['gpus']))" 2>/dev/null)" = "[$1]" ]
}
no_clients() { [ "$(status_py "len(d['clients'])" 2>/dev/null)" = 0 ]; }

# pair NAME [ENV=VALUE...]: A and B started together, held at the end.
pair() {
  local n=$1; shift
  rm -f "$T/go" "$T/end"
  for j in A B; do
    bg env "$@" LD_PRELOAD="$PRELOAD" "$SAPP" --name "$n$j" --ranges "$RANGES" --steps 150 \
      --kernel-us 2000 --start-file "$T/go" --end-file "$T/end" >"$T/$n$j.out" 2>"$T/$n$j.err"
    wait_log 20 "$T/$n$j.out" "^READY name=$n$j"
  done
  # The GPU is serialized now (672 of 512 MiB): both pin their staging in
  # the background; the hand-offs start once it is there (so no swap-out
  # falls back to the prefetch path for lack of it).
  wait_for "$hg" staged_all 336 || not_ok "$n: staging pinned before the run"
  touch "$T/go"
  job_wait "${n}A" "$hg"; job_wait "${n}B" "$hg"
  for j in A B; do
    check "$n: $j finished, every byte of its 3 ranges intact" job_ok "$n$j"
    check "$n: $j never faulted (every hold began with its ranges in place)" \
      [ "$(jfield "$n$j" fault_bytes)" = 0 ]
    check "$n: $j made no stray access (nothing read a discarded page)" \
      [ "$(jfield "$n$j" stray)" = 0 ]
    check "$n: $j moved nothing by Unified Memory prefetch to the host" \
      [ "$(jfield "$n$j" d2h_bytes)" = 0 ]
  done
}

n0=$(count_events lock_ok)
pair fast
nlock=$(( $(count_events lock_ok) - n0 ))
check "fast: the GPU was serialized and handed off ($nlock grants)" [ "$nlock" -ge 4 ]
da=$(jfield fastA discard_bytes) db=$(jfield fastB discard_bytes)
check "fast: swapped-out ranges were discarded after their copy (A $da, B $db bytes)" \
  [ "$da" -gt 0 ] && [ "$db" -gt 0 ]
# Just what the next holder needs (160 MiB): a 160 MiB part of the 256 MiB
# range, not the whole range nor 16 + 64 + part of 256.
check "fast: each swap-out moved 160 MiB, part of one range (discards are multiples of 160 MiB: A $da, B $db)" \
  [ $(( da % (160 << 20) )) = 0 ] && [ $(( db % (160 << 20) )) = 0 ]
got=$(status_py "sorted((g['swap']['fast_bytes'] >> 20, g['swap']['prefetch_bytes'], g['swap']['pinned_bytes'], g['swap']['staging_bytes'] >> 20) for c in d['clients'] for g in c['gpus'])")
diag "per client (fast MiB, prefetch, pinned, staging MiB): $got"
check "fast: nvsharectl --json: each client 336 MiB fast, nothing by prefetch or pinned, staging 336 MiB" \
  [ "$got" = "[(336, 0, 0, 336), (336, 0, 0, 336)]" ]
cin=$(status_py "sum(g['swap']['bytes_in'] for c in d['clients'] for g in c['gpus'])")
cout=$(status_py "sum(g['swap']['bytes_out'] for c in d['clients'] for g in c['gpus'])")
check "fast: swap counters filled (in $cin, out $cout bytes)" test "${cin:-0}" -gt 0 -a "${cout:-0}" -gt 0
scrape >"$T/metrics.txt"
check "fast: /metrics nvshare_gpu_swap_staging_bytes = 672 MiB, _fast_bytes = 672 MiB" \
  awk '/^nvshare_gpu_swap_staging_bytes\{/ && $2 == 704643072 { a = 1 } /^nvshare_gpu_swap_fast_bytes\{/ && $2 == 704643072 { b = 1 } END { exit !(a && b) }' "$T/metrics.txt"
touch "$T/end"
wait_for "$hg" no_clients

pair trap NVSHARE_SWAP_TRAP=1
got=$(status_py "sorted(g['swap']['trap_mode'] for c in d['clients'] for g in c['gpus'] if c['claimed_name'] == 'swap_app')")
check "trap: the clients say trap mode ($got)" [ "$got" = "[True, True]" ]
touch "$T/end"
[ -n "${NVS_VERBOSE:-}" ] && show_logs
true
