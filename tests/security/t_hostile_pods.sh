#!/usr/bin/env bash
# nvs-test: slow (a LIST of 5,000 Pods of 1.5 MiB (7.5 GB through the watch))
# Big Pods on the node (issue 31 item 4, docs/security.md "Big Pods"): the
# Pod watch's LIST of 5,000 Pods of 1.5 MiB each (7.5 GB, nearly all of it
# one annotation per Pod, which tenants control) is read as it arrives -
# 100 Pods a page, each page streamed through the incremental reader
# (k8s_jstream.c), nothing kept but the fields nvshare uses - so the
# scheduler's peak memory stays <= 200 MiB (the DaemonSet's limit is 256;
# before: a whole page buffered and parsed, OOM at about 105 such Pods).
# 50 MODIFIED events of the same size on the watch afterwards stay within
# it too; a client in one of the Pods gets that Pod's annotation limit, and
# an honest client's lock waits stay within issue 17's bound meanwhile.
# The fake API server serves plain HTTP here (7.5 GB through TLS twice
# would be most of the test's time) and writes the pages from one shared
# blob.
# shellcheck disable=SC1091,SC2154 # libs by path; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"
N=5000
SIZE=$((1536 * 1024))
echo tok-big >"$T/token"
mkfifo "$T/api.ctl"
exec 9<>"$T/api.ctl"
bg "$PY" "$API_PY" --plain --token tok-big --ctl "$T/api.ctl" --port-file "$T/api.port" \
  --bulk "$N" --bulk-bytes "$SIZE" >"$T/api.out" 2>&1
wait_for 10 test -s "$T/api.port" || { not_ok "fake API server starts"; exit 1; }
API_URL=http://127.0.0.1:$(cat "$T/api.port")
t0=$(date +%s%N)
start_scheduler --no-nvml --mode on --proc-root "$PROC" --kube-api "$API_URL" \
  --kube-token-file "$T/token" --node-name "$NODE" || { not_ok "scheduler starts"; exit 1; }
# The honest client is a host process (a cgroup outside kubepods in the
# fake proc root): no Pod, no limits.
fcpod H "0::/user.slice/user-0.slice/session-1.scope" \
  --gpu-uuid GPU-5e1f0000-0000-4000-8000-0000000000cc --script "$(honest_script 300)"
rtt_start H
check "the LIST of $N Pods of $((SIZE >> 20)).5 MiB completes (k8s_list pods=$N)" \
  wait_event "$(scaled 120)" k8s_list pods="$N"
t1=$(date +%s%N)
pages=$(api_count 'REQ LIST 200')
diag "LIST: $pages pages in $(( (t1 - t0) / 1000000 )) ms"
rss=$(hwm_kib "$SCHED_PID")
lim=$((200 * 1024))
san && lim=$((lim * 2))
check "scheduler peak RSS after the LIST: $((rss / 1024)) MiB <= $((lim / 1024)) MiB" test "$rss" -le "$lim"
check "pages of at most 100 Pods ($pages pages)" test "$pages" -ge $((N / 100))
check "status: the watch holds $N Pods" \
  test "$(status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["kube"]["pods"])')" = "$N"
wait_exit 60 "$PID_H"
check "the honest client finished its 300 lock cycles (rc $RC)" test "$RC" = 0
check_p99 H "during the LIST of $N big Pods"

# A client of bulk Pod 7: the Pod's annotation (core 30) reached it.
fcpod P "$(cg_systemd_v2 00000000-0000-4000-8000-000000000007)" \
  --gpu-uuid GPU-5e1f0000-0000-4000-8000-0000000000cc --script stay
check "a client in Pod bulk/bulk-00007 gets its annotation's core limit (30)" \
  wait_ev 10 P 'SET_LIMITS gpu=0 core_limit=30 '

# 50 watch events of the same size, one after the other.
api_cmd '{"op":"bulk_modify","n":50}'
check "50 MODIFIED events of 1.5 MiB sent" wait_for "$(scaled 60)" api_more 'SENT MODIFIED uid=0+-0000-4000-8000-000000000049 ' 0
after_events() { grep -q 'k8s: bulk/bulk-00049' "$T/scheduler.log" || [ "$(api_count 'SENT MODIFIED')" -ge 50 ]; }
wait_for "$(scaled 30)" after_events
# The last event was read once the status shows its resourceVersion moved
# on; the watch's state stays "watching".
check "the watch is still on (watching)" \
  wait_for "$(scaled 30)" sh -c "'$CTL' --json | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)[\"kube\"][\"watch\"] != \"watching\")'"
check "no watch event was dropped as too long or malformed" \
  sh -c "! grep -qE 'watch event\(s\) over|malformed watch event' '$T/scheduler.log'"
rss=$(hwm_kib "$SCHED_PID")
check "scheduler peak RSS after the events: $((rss / 1024)) MiB <= $((lim / 1024)) MiB" test "$rss" -le "$lim"
check "scheduler healthy" sched_alive
