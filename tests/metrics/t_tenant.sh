#!/usr/bin/env bash
# Metrics privacy (issue 16 part 3, docs/metrics.md "Tenants"): with the
# defaults the exporter binds 127.0.0.1; client series are per tenant (Pod,
# else uid) and GPU, never labelled by pid or by the name a client claims;
# several processes of one tenant are one series whose counters do not go
# down when one of them exits; the series ends with the tenant's last
# process. NVSHARE_METRICS_PROCESS_LABELS=1 brings back per-process series.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/metrics_lib.sh"

# Default address: no --metrics-addr.
start_scheduler --metrics --metrics-port 0 --mode on
check "exporter binds 127.0.0.1 by default" \
  wait_event 5 metrics_listening addr='"127.0.0.1"' port='[1-9][0-9]*'
MPORT=$(event_field port metrics_listening | tail -1)
MURL=http://127.0.0.1:$MPORT
U=$(test_gpu_uuid)
TEN="gpu=\"0\",uid=\"$(id -u)\""

# Two processes of one tenant (same uid, no Pod). A claims to be the
# kubelet with pid 1 in HELLO: neither may appear as a label.
fc A --gpu-uuid "$U" --alloc 1Gi --name kubelet --script 'lock;hold 300ms;release;mark DONE;stay'
fc B --gpu-uuid "$U" --alloc 2Gi --name trainer-b --script 'lock;hold 300ms;release;mark DONE;stay'
APID=$(awk '/READY/ { sub(/.*pid=/, ""); print; exit }' "$T/A.out")
v() { scrape >"$T/cur.txt" && metric_value "$1" "$T/cur.txt"; }
v_is() { [ "$(v "$1")" = "$2" ]; }
check "one series for the tenant's 2 processes" wait_for 5 v_is "nvshare_client_processes{$TEN}" 2
check "both grants counted" wait_for 10 v_is "nvshare_client_lock_grants_total{$TEN}" 2
wait_for 10 grep -q 'MARK DONE' "$T/B.out"
wait_for 10 grep -q 'MARK DONE' "$T/A.out"
# Both holds over (0.6 s): the next snapshot has them (200 ms).
held_over() { awk -v a="$(v "nvshare_client_lock_held_seconds_total{$TEN}")" 'BEGIN { exit !(a > 0.55) }'; }
check "held seconds of both holds" wait_for 5 held_over
check "allocated is the sum (1Gi + 2Gi)" v_is "nvshare_client_managed_allocated_bytes{$TEN}" 3221225472
scrape >"$T/m1.txt"
check "no client series carries pid, host_pid or name" \
  sh -c "! grep -E '^nvshare_client' '$T/m1.txt' | grep -qE '(pid|name)='"
check "the claimed name 'kubelet' appears nowhere" sh -c "! grep -q kubelet '$T/m1.txt'"
check "no nvshare_client_info by default" sh -c "! grep -q '^nvshare_client_info' '$T/m1.txt'"
if command -v promtool >/dev/null; then
  check "promtool accepts it" promtool check metrics <"$T/m1.txt"
else
  ok "# SKIP promtool not installed"
fi
held1=$(metric_value "nvshare_client_lock_held_seconds_total{$TEN}" "$T/m1.txt")

# A exits; B stays: the tenant's counters keep A's share.
kill -TERM "$APID" 2>/dev/null
check "A gone: 1 process left in the series" wait_for 5 v_is "nvshare_client_processes{$TEN}" 1
scrape >"$T/m2.txt"
check "grants did not go down when A left" \
  test "$(metric_value "nvshare_client_lock_grants_total{$TEN}" "$T/m2.txt")" = 2
held2=$(metric_value "nvshare_client_lock_held_seconds_total{$TEN}" "$T/m2.txt")
check "held seconds did not go down ($held1 -> $held2)" awk -v a="$held1" -v b="$held2" 'BEGIN { exit !(b >= a && a > 0.5) }'
check "allocated now B's alone (2Gi)" \
  test "$(metric_value "nvshare_client_managed_allocated_bytes{$TEN}" "$T/m2.txt")" = 2147483648
BPID=$(awk '/READY/ { sub(/.*pid=/, ""); print; exit }' "$T/B.out")
kill -TERM "$BPID" 2>/dev/null
check "last process gone: the series ends" wait_for 5 v_is nvshare_scheduler_clients 0
scrape >"$T/m3.txt"
check "no tenant series left" sh -c "! grep -q '^nvshare_client_processes{' '$T/m3.txt'"
kill -TERM "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null

# The option: per-process series and the claimed name, for debugging.
mv "$T/scheduler.log" "$T/scheduler-1.log"
export NVSHARE_METRICS_PROCESS_LABELS=1
start_metrics_scheduler --mode on
unset NVSHARE_METRICS_PROCESS_LABELS
fc C --gpu-uuid "$U" --alloc 1Gi --name kubelet --script stay
CPID=$(awk '/READY/ { sub(/.*pid=/, ""); print; exit }' "$T/C.out")
check "NVSHARE_METRICS_PROCESS_LABELS=1: client_info with host_pid and the claimed name" \
  wait_for 5 sh -c "curl -sf --max-time 2 '$MURL/metrics' | grep -qE '^nvshare_client_info\{.*host_pid=\"$CPID\".*name=\"kubelet\"\} 1$'"
"$B/nvshare-scheduler" --metrics-addr nohost >"$T/flag.out" 2>&1
check "bad --metrics-addr refused (exit 2)" test $? = 2
