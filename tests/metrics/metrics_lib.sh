# shellcheck shell=bash
# Helpers for the exporter tests; source after tests/lib.sh. The fake
# clients (fc, wait_ev, ...) are tests/sched/sched_lib.sh's.
# shellcheck source=tests/sched/sched_lib.sh
. "$NVS_ROOT/tests/sched/sched_lib.sh"

# free_port: prints a TCP port free on 127.0.0.1 (the kernel's choice).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_metrics_scheduler [args...]: a scheduler with the exporter on
# 127.0.0.1 and a port of the kernel's choice; sets MPORT from its
# metrics_listening event (the last one: an earlier scheduler of the same
# test may have had its own).
start_metrics_scheduler() {
  local n
  n=$(count_events metrics_listening)
  start_scheduler --metrics --metrics-addr 127.0.0.1 --metrics-port 0 "$@" || return 1
  wait_events "$(scaled 10)" $((n + 1)) metrics_listening addr='"127.0.0.1"' || return 1
  MPORT=$(event_field port metrics_listening | tail -1)
  MURL=http://127.0.0.1:$MPORT
}

scrape() { curl -sf --max-time 5 "$MURL/metrics"; }

# metric_value 'NAME{labels}' FILE: the value of a series (exact label text).
metric_value() { awk -v k="$1" '$1 == k { print $2; exit }' "$2"; }

# test_gpu_uuid: the UUID of GPU 0 when the scheduler found GPUs through
# NVML (the simulated GPU), else a made-up one it will learn from clients.
test_gpu_uuid() {
  local u
  u=$(scrape | grep -oE '^nvshare_gpu_info\{gpu="0",uuid="[^"]*"' | sed 's/.*uuid="//; s/"$//')
  echo "${u:-GPU-nvshare-metrics-test}"
}
