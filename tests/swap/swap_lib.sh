# shellcheck shell=bash disable=SC2154
# Helpers for the swap tests (sourced after tests/lib.sh and
# tests/metrics/metrics_lib.sh).
SAPP=$B/tests/swap/swap_app
SLOG=$T/scheduler.log # the human log: shown on failure, never asserted on
RANGES=16Mi,64Mi,256Mi

# job NAME [swap_app args...]: starts swap_app under libnvshare.so.
job() {
  local n=$1; shift
  bg env LD_PRELOAD="$PRELOAD" "$SAPP" --name "$n" --ranges "$RANGES" "$@" \
    >"$T/$n.out" 2>"$T/$n.err"
}
job_wait() { wait_log "$2" "$T/$1.out" "^DONE name=$1 "; }
job_ok() { grep -qE "^DONE name=$1 result=ok" "$T/$1.out"; }
# jfield NAME KEY: KEY=value from NAME's DONE line.
jfield() { grep -oE "(^| )$2=[^ ]*" "$T/$1.out" | head -1 | sed "s/^ *$2=//"; }
# pflog: the simulated GPU's prefetch log, "seq pid dst ptr bytes moved start end".
pflog() { "$SAPP" --prefetch-log | sed 's/^PF //'; }
# status_json PYEXPR: evaluates PYEXPR with d = nvsharectl --json.
status_py() {
  "$B/nvsharectl" --json >"$T/status.json" || return 1
  python3 -c "import json,sys; d=json.load(open('$T/status.json')); print($1)"
}
show_logs() {
  local f
  for f in "$T"/*.out "$T"/*.err "$SLOG" "$NVSHARE_EVENTS"; do
    [ -f "$f" ] || continue
    echo "# ---- $(basename "$f") (last 12 lines)"
    tail -n 12 "$f" | sed 's/^/#   /'
  done
}
