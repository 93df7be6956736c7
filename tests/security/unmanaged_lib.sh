# shellcheck shell=bash disable=SC2154,SC2034 # lib variables; sets APP and HG for the tests
# Helpers for the unmanaged-process tests (source after tests/lib.sh; CTL
# is nvsharectl): the status JSON read through Python (no jq in CI).

# st EXPR: evaluates a Python expression over the status JSON (s).
st() {
  "$CTL" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(eval(sys.argv[1]))' "$1"
}
st_is() { [ "$(st "$1")" = "$2" ]; }
# read_checks: c1 = the status's detection-pass counter. Read until a status
# answers: an empty c1 (one nvsharectl call lost on a loaded machine) made
# a later comparison a syntax error, a failure whatever the scheduler did.
read_checks() {
  c1=
  _c1() { c1=$(st "s['unmanaged']['checks']") && [ -n "$c1" ]; }
  wait_for "$(scaled 10)" _c1 || not_ok "the status's detection-pass counter read"
}
# evidence_setup: for the tests of evidence (t_unmanaged_evasion.sh,
# t_claims_evidence.sh): APP (sim_app; the test is skipped without the
# simulated GPU), detection passes every 500 ms, HG (a hang guard), and
# SHIM_PRELOAD for evade_conn.so (tests/lib.sh shim_preload).
evidence_setup() {
  APP=$B/tests/e2e/sim_app
  if [ ! -x "$B/tests/sim/libnvidia-ml.so.1" ] || [ ! -x "$APP" ]; then
    ok "# SKIP simulated GPU not built"; exit 0
  fi
  export NVSHARE_UNMANAGED_INTERVAL_MS=500
  HG=$(scaled 15)
  shim_preload "$B/tests/security/evade_conn.so"
}
