#!/usr/bin/env bash
# Handoff latency with the exporter off, and on while scraped (not a test:
# run by hand, numbers for docs/BENCHMARKS.md).
#
#   tests/metrics/bench_scrape.sh [REPEATS] [ROUNDS]
#
# Runs bench/sched_latency (2 and 64 clients) against a fresh scheduler per
# run, alternating: metrics off; metrics on and scraped every second (curl);
# metrics on and scraped every 10 ms (stress). Prints each run's lines
# prefixed with the configuration.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/metrics_lib.sh"
REPEATS=${1:-3}
ROUNDS=${2:-2000}

run() { # run CONFIG SCRAPE_INTERVAL_S|-
  local cfg=$1 every=$2 spid=""
  if [ "$every" = - ]; then
    start_scheduler --no-nvml
  else
    start_metrics_scheduler --no-nvml
    ( while :; do curl -s --max-time 2 -o /dev/null "$MURL/metrics"; sleep "$every"; done ) &
    spid=$!
  fi
  "$B/bench/sched_latency" --clients 2,64 --rounds "$ROUNDS" 2>&1 | sed "s/^/$cfg /"
  [ -n "$spid" ] && { kill "$spid"; wait "$spid" 2>/dev/null; }
  if [ "$every" != - ]; then
    sleep 0.3
    echo "$cfg exporter $(curl -s "$MURL/metrics" | awk '$1=="nvshare_metrics_snapshots_total"{print "snapshots=" $2}')"
  fi
  kill -TERM "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null
}
for _ in $(seq 1 "$REPEATS"); do
  run off -
  run scrape1s 1
  run scrape10ms 0.01
done
