#!/usr/bin/env bash
# Strict configuration (docs/scheduler.md "Running"): ONE table with a bad
# value for every scheduler variable and its flag. Each one, through the
# environment and through the flag, stops the start with exit 2 and a
# message naming the variable (or flag), the value and the valid range.
# Then impossible combinations, and that this table covers every variable
# of the scheduler's settings table (scheduler/settings.def), the only
# place the scheduler reads variables from.
. "$(dirname "$0")/../lib.sh"
S=$B/nvshare-scheduler
LONG=$(printf 'x%.0s' $(seq 1 600))
# variable | flag ("-": a switch, no value to get wrong) | bad value
TABLE="
NVSHARE_SOCK_DIR|--sock-dir|/$(printf 'd%.0s' $(seq 1 100))
NVSHARE_ADMIN_SOCK_DIR|--admin-sock-dir|/$(printf 'a%.0s' $(seq 1 100))
NVSHARE_SCHED_MODE|--mode|sideways
NVSHARE_TQ|--tq|0ms
NVSHARE_GPU_CAPACITY|--capacity|2Pi
NVSHARE_GPU_MEMORY_RESERVE|--reserve|lots
NVSHARE_IDLE_RELEASE_MS|--idle-release-ms|-5
NVSHARE_DROP_GRACE_MS|--drop-grace-ms|0
NVSHARE_SCHED_NVML|-|maybe
NVSHARE_METRICS_ENABLE|-|perhaps
NVSHARE_METRICS_PORT|--metrics-port|70000
NVSHARE_METRICS_ADDR|--metrics-addr|localhost
NVSHARE_METRICS_PROCESS_LABELS|-|sometimes
NVSHARE_UNMANAGED|--unmanaged|serialise
NVSHARE_UNMANAGED_INTERVAL_MS|--unmanaged-interval|5
NVSHARE_PROC_ROOT|--proc-root|/$LONG
NODE_NAME|--node-name|$LONG
NVSHARE_KUBE_API|--kube-api|https://$LONG
NVSHARE_KUBE_TOKEN_FILE|--kube-token-file|/$LONG
NVSHARE_KUBE_CA_FILE|--kube-ca-file|/$LONG
NVSHARE_KUBE|-|perhaps
NVSHARE_EVENTS|--events|/$LONG
NVSHARE_STATE_FILE|--state-file|/$LONG
NVSHARE_HEALTH_STALL_MS|--health-stall-ms|100
NVSHARE_DEBUG|-|maybe
NVSHARE_UNKNOWN_TENANT_CORE_LIMIT|--unknown-tenant-core-limit|0
NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT|--unknown-tenant-memory-limit|0
NVSHARE_COMPUTE_WINDOW_MS|--compute-window-ms|10
NVSHARE_OVERSUBSCRIPTION_FACTOR|--oversubscription-factor|0
NVSHARE_MODE_DWELL_MS|--mode-dwell-ms|2min
NVSHARE_MODE_SWITCH_BURST|--mode-switch-burst|0
NVSHARE_REPORT_RATE|--report-rate|0
NVSHARE_SWAP_TQ_MAX_FACTOR|--swap-tq-max-factor|101
NVSHARE_MAX_CONNS_PER_TENANT|--max-conns-per-tenant|lots
NVSHARE_HANDSHAKE_TIMEOUT_MS|--handshake-timeout-ms|50
NVSHARE_CONN_BUFFER_BUDGET|--conn-buffer-budget|1Ki
NVSHARE_ACCEPT_RATE|--accept-rate|5
NVSHARE_MAX_IDLE_CLIENTS_PER_TENANT|--max-idle-clients-per-tenant|some
NVSHARE_LOG_RATE|--log-rate|-1
NVSHARE_COSCHEDULE|--coschedule|sometimes
NVSHARE_PREEMPT_MS|--preempt-ms|2h
NVSHARE_MIN_SLICE_MS|--min-slice-ms|2h
NVSHARE_BATCH_FLOOR_PERCENT|--batch-floor|101
NVSHARE_QUOTA_SAMPLE_INTERVAL_MS|--quota-sample-interval-ms|5000
NVSHARE_QUOTA_CARRYOVER_PERCENT|--quota-carryover-percent|101
NVSHARE_DROP_TAIL_BILLING_PERCENT|--drop-tail-billing-percent|-1
NVSHARE_QUOTA_SLICE_MS|--quota-slice-ms|1
NVSHARE_GPU_MEMORY_UNIT|--gpu-memory-unit|1Ki
NVSHARE_SWAP_OUT|--swap-out|some
NVSHARE_SWAP_TQ_FACTOR|--swap-tq-factor|5000
NVSHARE_LOG_FORMAT|--log-format|xml
"
# run WHAT VALUE [env VAR=...] [args]: must exit 2 (at once; 20 s guard), naming WHAT
# and the value and saying what is expected.
run() {
  local what=$1 val=$2; shift 2
  timeout 20 "$@" >"$T/out" 2>&1; local rc=$?
  [ "$rc" = 2 ] && grep -qF -- "$what" "$T/out" && grep -qF -- "\"${val:0:40}" "$T/out" &&
    grep -q "expected" "$T/out"
}
n=0
while IFS='|' read -r var flag val; do
  [ -n "$var" ] || continue
  n=$((n + 1))
  check "$var=${val:0:24}: exit 2 naming it, the value and the range" \
    run "$var" "$val" env "$var=$val" "$S" --no-nvml --no-kube --state-file none
  if [ "$flag" != - ]; then
    check "$flag ${val:0:24}: exit 2 naming it, the value and the range" \
      run "$flag" "$val" "$S" --no-nvml --no-kube --state-file none "$flag" "$val"
  fi
done <<<"$TABLE"
diag "$n variables tried"

# This table covers every variable of the scheduler's settings table, and
# no scheduler source reads a variable of its own beside it.
read_vars=$(grep -ohE '"(NVSHARE_[A-Z0-9_]+|NODE_NAME)"' "$NVS_ROOT"/scheduler/settings.def |
  tr -d '"' | sort -u)
missing=$(for v in $read_vars; do echo "$TABLE" | grep -q "^$v|" || echo "$v"; done | tr '\n' ' ')
nvars=$(echo "$read_vars" | wc -w)
check "every variable of scheduler/settings.def ($nvars) has a bad value here (missing: ${missing:-none})" \
  test -z "$missing" -a "$nvars" -ge 50
own=$(grep -lE 'getenv\("(NVSHARE_|NODE_NAME)' "$NVS_ROOT"/scheduler/*.c "$NVS_ROOT"/scheduler/k8s/*.c |
  tr '\n' ' ')
check "no scheduler source reads a setting's variable itself (found in: ${own:-none})" [ -z "$own" ]
# ... and every flag of the table is in --help.
nohelp=$(echo "$TABLE" | awk -F'|' '$2 ~ /^--/ {print $2}' | while read -r f; do
  "$S" --help | grep -qF -- "$f" || echo "$f"; done | tr '\n' ' ')
check "every flag is in --help (missing: ${nohelp:-none})" [ -z "$nohelp" ]

# Impossible combinations (the simulated GPU has NVML and its memory).
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
run "GPU" "" "$S" --no-kube --state-file none --capacity 99Ti
check "a capacity above the GPU's memory (99Ti) stops the start" grep -q "more than its memory" "$T/out"
run "reserve" "" "$S" --no-kube --state-file none --reserve 900Ti
check "a reserve not below the GPU's memory stops the start" grep -q "is not less than GPU 0" "$T/out"
timeout 5 "$S" --no-kube --state-file none --capacity 1Gi,1Gi,1Gi,1Gi,1Gi,1Gi,1Gi,1Gi,1Gi >"$T/out" 2>&1
check "a capacity list longer than the GPUs stops the start (exit $?)" grep -q "this node has" "$T/out"
timeout 5 env NVSHARE_COMPUTE_WINDOW_MS=1000 "$S" --no-kube --state-file none --quota-slice-ms 2000 >"$T/out" 2>&1
check "a quota slice longer than the compute window stops the start (exit $?)" grep -q "longer than the compute" "$T/out"
diag "GPUs seen by nvidia-smi: $gpus"
# A good value through an env-only-until-now flag is taken.
start_scheduler --compute-window-ms 4000 --log-format json
check "--compute-window-ms 4000 is in force" sh -c "'$B/nvsharectl' --json | jq -e '.defaults.compute_window_ms == 4000' >/dev/null"
check "--log-format json: the log is JSON lines" sh -c "head -1 '$T/scheduler.log' | jq -e '.component == \"scheduler\"' >/dev/null"
# One meaning of 0 for memory limits: never a limit.
"$B/nvsharectl" --set-client 1 --memory-limit 0 >/dev/null 2>"$T/ctl.err"
check "nvsharectl --memory-limit 0 is a usage error (exit $?), pointing to none" grep -q "use none" "$T/ctl.err"
