#!/usr/bin/env bash
# Idle release: A holds the GPU and goes idle while B waits; B must get the
# GPU (and finish a kernel) within 50 ms of A's last kernel (times the
# machine's speed factor, tests/lib.sh). The quantum is long (30 s), so
# only the idle release can hand the GPU over.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e_lib.sh"

KUS=2000
export NVSHARE_SCHED_MODE=on NVSHARE_TQ=30
start_scheduler || { not_ok "scheduler starts"; show_logs; exit 1; }
app A --kernels 300 --kernel-us $KUS --idle-after 150 --idle-ms 1500
wait_log 10 "$T/A.out" "^PROGRESS name=A kernel=5/"
app B --kernels 50 --kernel-us $KUS
app_wait B 30; app_wait A 30

check "A finished" app_ok A
check "B finished" app_ok B
check "B queued behind A" has_event req_lock client=2 holder=1
check "A released the lock for idleness" has_event lock_released client=1 reason='"idle"'
idle_from=$(awk '$1 == "IDLE" { for (i = 2; i <= NF; i++) if ($i ~ /^from=/) print substr($i, 6) }' "$T/A.out")
b_first=$(first_t B PROGRESS)
b_start=$(first_t B START)
if [ -n "$idle_from" ] && [ -n "$b_first" ]; then
  lat=$(awk -v a="$idle_from" -v b="$b_first" -v k="$KUS" 'BEGIN { printf "%.2f", b - a - k / 1000 }')
  diag "A's last kernel ended at $idle_from ms; B started $b_start, first kernel done $b_first ms"
  diag "idle-release latency (A's last kernel end -> B's first kernel start): $lat ms"
  check "B ran nothing while A held the GPU" awk -v a="$idle_from" -v b="$b_first" 'BEGIN { exit !(b > a) }'
  # Wall time (two processes' own clocks): 50 ms on an idle CI machine,
  # stretched by the measured speed factor (tests/lib.sh).
  lim=$(scaled 50)
  check "B progresses within $lim ms of A's last kernel ($lat ms; 50 ms x speed $(speed_factor))" \
    awk -v l="$lat" -v m="$lim" 'BEGIN { exit !(l <= m) }'
else
  not_ok "timestamps found (A idle: '$idle_from', B first: '$b_first')"
fi
finish
