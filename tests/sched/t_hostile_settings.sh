#!/usr/bin/env bash
# The hostile-load settings (docs/scheduler.md, README): each one is a flag
# and an NVSHARE_* variable, listed in --help with its default; a bad value
# stops the scheduler with exit 2 and a message naming the setting, the
# value and the valid range; good values are taken.
# shellcheck disable=SC1091,SC2154 # libs by path; lib variables
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"
S=$B/nvshare-scheduler
help=$("$S" --help)
for f in "--oversubscription-factor N:NVSHARE_OVERSUBSCRIPTION_FACTOR (4)" \
  "--mode-dwell-ms MS:NVSHARE_MODE_DWELL_MS (1000)" "--mode-switch-burst N:NVSHARE_MODE_SWITCH_BURST (4)" \
  "--report-rate N:NVSHARE_REPORT_RATE (50)" "--swap-tq-max-factor N:NVSHARE_SWAP_TQ_MAX_FACTOR (4)"; do
  check "--help lists ${f%%:*} and ${f#*:}" sh -c 'printf "%s" "$1" | grep -qF -- "$2" && printf "%s" "$1" | grep -qF -- "$3"' sh "$help" "${f%%:*}" "${f#*:}"
done
# bad VALUE ARGS...: exit 2, the message names what and the range.
bad() {
  local want=$1; shift
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = 2 ] && printf '%s' "$out" | grep -qF -- "$want"
}
check "--report-rate 0 refused (range 1..10000)" bad '--report-rate: "0" (expected an integer 1..10000' "$S" --no-nvml --report-rate 0
check "--oversubscription-factor x refused" bad '--oversubscription-factor: "x" (expected an integer 1..1000)' "$S" --no-nvml --oversubscription-factor x
check "--mode-dwell-ms 2m refused (over 60000 ms)" bad '--mode-dwell-ms: "2m" (expected 0..60000 ms' "$S" --no-nvml --mode-dwell-ms 2m
check "NVSHARE_MODE_SWITCH_BURST=0 refused" bad 'NVSHARE_MODE_SWITCH_BURST: "0" (expected an integer 1..100)' env NVSHARE_MODE_SWITCH_BURST=0 "$S" --no-nvml
check "NVSHARE_SWAP_TQ_MAX_FACTOR=101 refused" bad 'NVSHARE_SWAP_TQ_MAX_FACTOR: "101"' env NVSHARE_SWAP_TQ_MAX_FACTOR=101 "$S" --no-nvml
# Good values are taken: burst 1 and a 2 s dwell make the second automatic
# switch wait (gpu_mode_deferred), visible through the events.
NVSHARE_MODE_DWELL_MS=2s start_scheduler --no-nvml --reserve 0 --mode-switch-burst 1 ||
  { not_ok "scheduler starts with good values"; exit 1; }
fc A --gpu-uuid GPU-set --total 10Gi --alloc 6Gi --script "mem 12Gi;mem 1Gi;until $T/done"
check "dwell 2s, burst 1: the switch back waits about 2 s" \
  wait_event 5 gpu_mode_deferred gpu=0 serialized=0 'wait_ms=(1[5-9][0-9]{2}|2000)\.[0-9]+'
check "... and then happens" wait_event 5 gpu_mode gpu=0 serialized=0
touch "$T/done"
