# shellcheck shell=bash disable=SC2154
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
