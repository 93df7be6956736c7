#!/usr/bin/env bash
# nvs-test: slow (a real Prometheus server scraping for half a minute; t_scrape is the fast tier's metrics test)
# A real Prometheus server scrapes the scheduler every second while fake
# clients hold and wait for a GPU; the values come back through its query
# API. The exporter runs with its defaults: the two clients (one uid, no
# Pod) are one tenant, one series per GPU, without pids or names. Every
# PromQL expression of deploy/grafana-dashboard.json must evaluate there
# too.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/metrics_lib.sh"

if ! command -v prometheus >/dev/null; then
  ok "# SKIP prometheus not installed"; exit 0
fi

# A quantum of an hour: A hands the GPU to B when the test says so, not
# when the default 30 s quantum runs out (a slow ASan round beside burners
# spent more than 30 s between A's grant and the "1 waiting" check).
start_metrics_scheduler --mode on --tq 3600
check "exporter serving" test -n "${MPORT:-}"
PPORT=$(free_port)
cat >"$T/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: nvshare
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
        labels:
          node: test-node
YML
bg prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" --log.level=warn >"$T/prometheus.log" 2>&1
PURL=http://127.0.0.1:$PPORT
check "prometheus ready" wait_for "$(scaled 30)" curl -sf --max-time 1 "$PURL/-/ready"

# pq QUERY: first result's value, or "none"; "error" when the query fails.
pq() {
  curl -s --max-time 5 "$PURL/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print("error"); sys.exit()
if d.get("status") != "success":
    print("error"); sys.exit()
r = d["data"]["result"]
if d["data"]["resultType"] == "scalar":
    print(r[1])
elif r:
    v = float(r[0]["value"][1])
    # NaN and infinities print as such (int() raises on them)
    print(int(v) if v == v and abs(v) != float("inf") and v == int(v) else v)
else:
    print("none")'
}
# pq_wait SECONDS QUERY EXPECTED: polls until pq QUERY prints EXPECTED.
# Deadlines only: SECONDS is stretched by the machine's speed factor
# (tests/lib.sh), since Prometheus scrapes once a second with a 1 s
# timeout and an ASan scheduler beside burners misses some scrapes.
pq_is() { [ "$(pq "$1")" = "$2" ]; }
# On a timeout it says what the query gave last.
pq_wait() {
  wait_for "$(scaled "$1")" pq_is "$2" "$3" && return 0
  diag "pq_wait: '$2' is '$(pq "$2")', not '$3' after $(scaled "$1") s"
  return 1
}

check "target up" pq_wait 30 'up{job="nvshare"}' 1

U=$(test_gpu_uuid)
# A holds until the test has seen it holding with B waiting; both then stay
# (killed at the end): no fixed hold can outlast a slow machine's checks.
# The Prometheus checks below start once the scheduler's own events show
# A holding and B queued behind it: their waits then cover only scrapes
# and queries (an ASan soak round beside burners took over 30 s to get
# both clients registered, and the clients' count was read in the meantime).
fc A --gpu-uuid "$U" --alloc 3Gi --name prom-holder --script "lock;mark HELD;until $T/a-go;release;stay"
check "A holds the GPU" wait_for "$(scaled 10)" grep -q 'MARK HELD' "$T/A.out"
fc B --gpu-uuid "$U" --alloc 1Gi --name prom-waiter --script 'lock;mark HELD;stay'
# shellcheck disable=SC2154 # PID_B is set by fc
check "B is queued behind A (event stream)" wait_event "$(scaled 10)" req_lock pid="$PID_B"
TEN="gpu=\"0\",uid=\"$(id -u)\""
diag "GPU $U, tenant {$TEN}"

check "2 clients (nvshare_scheduler_clients)" pq_wait 8 'nvshare_scheduler_clients' 2
check "one tenant series with 2 processes" pq_wait 5 "nvshare_client_processes{$TEN}" 2
check "... and only one" pq_wait 5 'count(nvshare_client_processes)' 1
check "tenant's allocated bytes (3Gi + 1Gi)" \
  pq_wait 5 "nvshare_client_managed_allocated_bytes{$TEN}" 4294967296
check "queue length 1" pq_wait 5 'nvshare_gpu_queue_length{gpu="0"}' 1
check "mode on" pq_wait 5 'nvshare_gpu_mode{gpu="0",mode="on"}' 1
check "tenant: 1 holding, 1 waiting" \
  pq_wait 5 "nvshare_client_state{$TEN,state=\"holding\"} * 10 + on (gpu, uid) nvshare_client_state{$TEN,state=\"waiting\"}" 11
check "no client series with a pid or a name label" \
  pq_is 'count({__name__=~"nvshare_client_.*",host_pid!=""}) or count({__name__=~"nvshare_client_.*",name!=""}) or vector(0)' 0
check "tenant's held-seconds rate > 0" \
  pq_wait 5 "rate(nvshare_client_lock_held_seconds_total{$TEN}[5s]) > bool 0" 1

touch "$T/a-go"
check "B holds the GPU after A's release" wait_for "$(scaled 10)" grep -q 'MARK HELD' "$T/B.out"
check "hand-offs counter > 0" pq_wait 6 'nvshare_gpu_handoffs_total{gpu="0"} > bool 0' 1
check "queue empty after the hand-off" pq_wait 5 'nvshare_gpu_queue_length{gpu="0"}' 0
check "tenant: 1 holding, 0 waiting, 2 grants" \
  pq_wait 5 "nvshare_client_state{$TEN,state=\"holding\"} * 10 + on (gpu, uid) nvshare_client_state{$TEN,state=\"waiting\"} + on (gpu, uid) nvshare_client_lock_grants_total{$TEN} * 100" 210
check "lock wait histogram has the wait" pq_wait 5 'nvshare_lock_wait_seconds_count{gpu="0"} >= bool 1' 1

# Dashboard expressions: each must be valid PromQL on this data.
if [ -f "$NVS_ROOT/deploy/grafana-dashboard.json" ]; then
  python3 - "$NVS_ROOT/deploy/grafana-dashboard.json" >"$T/exprs" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def walk(ps):
    for p in ps:
        for t in p.get("targets", []):
            e = t["expr"].replace("$__rate_interval", "10s").replace("$node", "test-node").replace("$gpu", ".*")
            print(e)
        walk(p.get("panels", []))
walk(d["panels"])
for v in d["templating"]["list"]:
    q = v.get("query")
    if isinstance(q, dict):
        print(q["query"].replace("label_values(", "count by (x) (").replace(", node)", ")").replace(", gpu)", ")").replace("$node", "test-node"))
PY
  n=0 bad=0
  while IFS= read -r e; do
    n=$((n + 1))
    r=$(pq "$e")
    if [ "$r" = error ]; then bad=$((bad + 1)); diag "dashboard query fails: $e"; fi
  done <"$T/exprs"
  check "all $n dashboard queries evaluate" test "$bad" = 0 -a "$n" -gt 10
  check "the dashboard's node selector lists the node's name (not the target's address)" \
    bash -c "curl -s --max-time 5 '$PURL/api/v1/label/node/values' | grep -q '\"test-node\"'"
  hq=$(grep -F 'state="holding"' "$T/exprs" | head -1)
  check "dashboard 'lock holder' panel shows one holder" pq_wait 5 "sum($hq)" 1
fi
