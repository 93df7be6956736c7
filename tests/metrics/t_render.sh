#!/usr/bin/env bash
# The exporter's text output from a hand-made snapshot (no scheduler):
# promtool accepts it, label values are escaped, the lock-wait histogram is
# cumulative with _count equal to the +Inf bucket. By default client series
# are per tenant (Pod, else uid) and GPU, with no pid or program name; with
# --process-labels (NVSHARE_METRICS_PROCESS_LABELS=1) per process.
. "$(dirname "$0")/../lib.sh"

R=$B/tests/metrics/render_sample
if [ ! -x "$R" ]; then not_ok "render_sample built ($R)"; exit 1; fi
"$R" >"$T/m.txt"
check "render_sample exits 0" test -s "$T/m.txt"

if command -v promtool >/dev/null; then
  if promtool check metrics <"$T/m.txt" >"$T/lint" 2>&1; then ok "promtool check metrics"
  else not_ok "promtool check metrics"; sed 's/^/# /' "$T/lint"; fi
  "$R" --no-nvml >"$T/m2.txt"
  check "promtool check metrics (no NVML samples)" promtool check metrics <"$T/m2.txt"
  "$R" --process-labels >"$T/mp.txt"
  check "promtool check metrics (process labels)" promtool check metrics <"$T/mp.txt"
else
  ok "# SKIP promtool not installed"
  ok "# SKIP promtool not installed"
  ok "# SKIP promtool not installed"
fi
[ -s "$T/m2.txt" ] || "$R" --no-nvml >"$T/m2.txt"
[ -s "$T/mp.txt" ] || "$R" --process-labels >"$T/mp.txt"

# Tenant series (the default): one per Pod (or uid) and GPU.
TP='gpu="0",pod="trainer-0",namespace="ml"'
check "two processes of one Pod: one series, 2 processes" \
  grep -qxF "nvshare_client_processes{$TP} 2" "$T/m.txt"
check "tenant state counts its processes (1 holding, 1 waiting)" sh -c "
  grep -qxF 'nvshare_client_state{$TP,state=\"holding\"} 1' '$T/m.txt' &&
  grep -qxF 'nvshare_client_state{$TP,state=\"waiting\"} 1' '$T/m.txt'"
check "tenant memory is the sum (12Gi + 2Gi)" \
  grep -qxF "nvshare_client_managed_allocated_bytes{$TP} 15032385536" "$T/m.txt"
check "tenant counters are sums (grants 4 + 1, held 1 s + 0.5 s)" sh -c "
  grep -qxF 'nvshare_client_lock_grants_total{$TP} 5' '$T/m.txt' &&
  grep -qxF 'nvshare_client_lock_held_seconds_total{$TP} 1.500000000' '$T/m.txt'"
check "no Pod: the tenant is the uid" grep -qxF 'nvshare_client_processes{gpu="0",uid="0"} 1' "$T/m.txt"
check "client series: no pid, host_pid or name label; no client_info" \
  sh -c "! grep -E '^nvshare_client' '$T/m.txt' | grep -qE '(pid|name)=' && ! grep -q '^nvshare_client_info' '$T/m.txt'"
check "no program name anywhere" sh -c "! grep -qE 'train\.py|sim_app|helper' '$T/m.txt'"

# Escaping: backslash, double quote, newline in a label value.
check "label value escaped (quote, backslash, newline)" \
  grep -qF 'name="python3 \"train.py\" C:\\x\n"' "$T/mp.txt"
check "GPU name escaped" grep -qF 'name="Sim \"GPU\"\\0\nline2"' "$T/m.txt"
check "one line per sample (no raw newline in values)" \
  awk '!/^#/ && !/^nvshare_[a-z_]+(\{.*\})? [-+0-9.eEInf]+$/ {bad=1} END {exit bad}' "$T/m.txt"

G0='gpu="0",uuid="GPU-00000000-1111-2222-3333-444444444444"'
check "histogram cumulative" grep -qF "nvshare_lock_wait_seconds_bucket{$G0,le=\"0.01\"} 5" "$T/m.txt"
check "histogram +Inf = count" sh -c "grep -qF 'nvshare_lock_wait_seconds_bucket{$G0,le=\"+Inf\"} 6' '$T/m.txt' && grep -qF 'nvshare_lock_wait_seconds_count{$G0} 6' '$T/m.txt'"
check "histogram sum in seconds" grep -qF "nvshare_lock_wait_seconds_sum{$G0} 2.500000000" "$T/m.txt"
check "mode one-hot" sh -c "grep -qF 'nvshare_gpu_mode{$G0,mode=\"auto\"} 1' '$T/m.txt' && grep -qF 'nvshare_gpu_mode{$G0,mode=\"on\"} 0' '$T/m.txt'"
check "client state one-hot" grep -qF 'nvshare_client_state{gpu="0",pid="1",host_pid="4242",uid="1000",pod="trainer-0",namespace="ml",state="holding"} 1' "$T/mp.txt"
check "pod labels omitted when unknown" grep -qF 'nvshare_client_managed_allocated_bytes{gpu="0",pid="4343",host_pid="4343",uid="0"} 8589934592' "$T/mp.txt"
check "no memory limit: series absent" sh -c "! grep -q 'nvshare_client_memory_limit_bytes{gpu=\"1\"' '$T/m.txt'"
check "core limit ratio" grep -qF 'nvshare_client_core_limit_ratio{gpu="0",pid="1",host_pid="4242",uid="1000",pod="trainer-0",namespace="ml"} 0.50' "$T/mp.txt"
check "process labels: client_info with the name" grep -qF 'nvshare_client_info{pid="7",host_pid="4444",uid="1000",pod="trainer-0",namespace="ml",client_id="1",name="helper"} 1' "$T/mp.txt"
check "utilization ratio" grep -qF "nvshare_gpu_utilization_ratio{$G0} 0.37" "$T/m.txt"
check "unknown capacity: series absent" sh -c "! grep -q 'nvshare_gpu_capacity_bytes{gpu=\"1\"' '$T/m.txt'"
check "no NVML: no utilization samples" sh -c "! grep -q '^nvshare_gpu_utilization_ratio{' '$T/m2.txt'"

# The families are the rows of scheduler/metrics.def, in its order (the
# docs' tables list them, table_doc prints them): with NVML samples and
# process labels every row is there, each once with its HELP and TYPE;
# without NVML the two NVML rows are left out, without process labels
# nvshare_client_info.
TD=$B/scheduler/table_doc
for t in sched gpu client; do "$TD" metrics $t; done |
  sed -n 's/^| `\(nvshare_[a-z_]*\).*/\1/p' >"$T/rows"
families() { sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' "$1"; }
check "every row of metrics.def rendered, in its order ($(wc -l <"$T/rows") rows)" \
  sh -c "[ -s '$T/rows' ] && [ \"\$(cat '$T/rows')\" = \"\$(sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' '$T/mp.txt')\" ]"
check "every family has its HELP before its TYPE" \
  awk '/^# HELP /{h=$3} /^# TYPE /{if ($3 != h) bad=1} END {exit bad}' "$T/mp.txt"
families "$T/m2.txt" >"$T/f2"
check "no NVML: all rows but the NVML ones and client_info" sh -c \
  "grep -vxE 'nvshare_gpu_utilization_ratio|nvshare_gpu_memory_used_bytes|nvshare_client_info' '$T/rows' | cmp -s - '$T/f2'"
families "$T/m.txt" >"$T/f1"
check "tenant series: all rows but client_info" sh -c \
  "grep -vxF nvshare_client_info '$T/rows' | cmp -s - '$T/f1'"
