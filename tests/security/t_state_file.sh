#!/usr/bin/env bash
# The state file against a local user (issue 31 item 8; docs/security.md
# "State file"). Each attack failed on 3e0f2f1:
#  - a saved capacity of 2^64-1 (turns serialization off) was restored: now
#    refused like the same value in the configuration (the file is set aside);
#  - a FIFO at the state path hung the start in open(): now opened
#    non-blocking, refused by fstat, set aside;
#  - in a directory others may write, a planted state.json.tmp was written
#    through and renamed: the state file became the planter's. Now such a
#    directory (or one another user owns) is refused, naming it, and nothing
#    is read or written there;
#  - a state file another user owns was believed: now set aside;
#  - a leftover (or planted) temporary file in a safe directory stopped
#    every write: now it is replaced, never written through.
# The planted files belong to uid 65534 (chown by root): what a tenant
# would leave. Needs root.
# shellcheck disable=SC1091,SC2154 # libs by path; lib variables
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../sched/sched_lib.sh"
if [ "$(id -u)" != 0 ]; then
  ok "state file attacks # skip needs root (files of another uid)"
  exit 0
fi
LOG=$T/scheduler.log
NOBODY=65534
js() {
  "$CTL" --json | python3 -c 'import json, sys
j = json.load(sys.stdin)
print(eval(sys.argv[1]))' "$1"
}
stop_sched() { kill -TERM "$SCHED_PID" && wait_exit 10 "$SCHED_PID"; }
# sched FILE: a scheduler with this state file.
sched() { NVSHARE_STATE_FILE=$1 start_scheduler --no-kube; }
owner() { stat -c %u "$1" 2>/dev/null || echo none; }
AUTO=$(((16 << 30) - (512 << 20))) # the simulated GPU's memory - the reserve

# ---- capacity 2^64-1 ----
SF=$T/state.json
printf '{"version": 1, "all": {"capacity": "18446744073709551615"}}' >"$SF"
sched "$SF" || { not_ok "scheduler starts"; cat "$LOG"; exit 1; }
check "capacity 2^64-1 in the state file: refused, the file set aside" \
  wait_event 5 state_loaded result='"ignored"' reason='"bad-settings"' moved=1
check "... the GPU keeps its configured capacity ($AUTO)" [ "$(js "j['gpus'][0]['capacity']")" = "$AUTO" ]
check "... the log says why" log_has "$LOG" 'state file .*"all": capacity .* is out of range (expected a size up to 1024Ti'
stop_sched || not_ok "scheduler stops"

# ---- a FIFO at the path ----
rm -f "$SF" "$SF.bad"
mkfifo "$SF"
check "a FIFO at the state path does not hang the start" sched "$SF"
check "... it is refused (not a regular file) and set aside" \
  wait_event 5 state_loaded result='"ignored"' reason='"not-a-file"' moved=1
check "... to $SF.bad" [ -p "$SF.bad" ]
stop_sched || not_ok "scheduler stops"

# ---- a directory others may write, with a planted temporary file ----
D=$T/shared
mkdir -m 1777 "$D"
: >"$D/state.json.tmp"
chown "$NOBODY" "$D/state.json.tmp"
sched "$D/state.json" || { not_ok "scheduler starts"; cat "$LOG"; exit 1; }
check "a directory writable by others is refused, naming it" \
  log_has "$LOG" "state file $D/state.json: its directory $D is writable by others (mode 1777): refusing"
check "... state_loaded: refused, unsafe-directory" \
  wait_event 5 state_loaded result='"refused"' reason='"unsafe-directory"'
"$CTL" -T 1 >/dev/null
check "a run-time change still applies" [ "$(js "j['settings']['tq']['text']")" = 1s ]
check "... but no state file is written there (none owned by uid $NOBODY)" \
  sh -c "[ ! -e '$D/state.json' ] && [ \"\$(stat -c %u '$D/state.json.tmp')\" = $NOBODY ] && [ ! -s '$D/state.json.tmp' ]"
check "... and the write is refused in the log" log_has "$LOG" "state file $D/state.json: its directory.*will not survive a restart"
stop_sched || not_ok "scheduler stops"

# ---- a directory another user owns ----
D2=$T/theirs
mkdir -m 0755 "$D2"
chown "$NOBODY" "$D2"
sched "$D2/state.json" || { not_ok "scheduler starts"; cat "$LOG"; exit 1; }
"$CTL" -T 1 >/dev/null
d2_refused() { [ ! -e "$D2/state.json" ] && log_has "$LOG" "its directory $D2 is owned by uid $NOBODY"; }
check "a directory owned by uid $NOBODY is refused: nothing written there" d2_refused
stop_sched || not_ok "scheduler stops"

# ---- a state file another user owns ----
D3=$T/safe
mkdir -m 0700 "$D3"
printf '{"version": 1, "all": {"tq_ms": 1}}' >"$D3/state.json"
chown "$NOBODY" "$D3/state.json"
sched "$D3/state.json" || { not_ok "scheduler starts"; cat "$LOG"; exit 1; }
check "a state file owned by uid $NOBODY is not believed (TQ stays 30s)" \
  [ "$(js "j['settings']['tq']['text'] + ' ' + j['settings']['tq']['source']")" = "30s default" ]
check "... it is set aside" wait_event 5 state_loaded result='"ignored"' reason='"foreign-owner"' moved=1

# ---- a leftover temporary file: replaced, never written through ----
printf 'victim\n' >"$T/victim"
ln -s "$T/victim" "$D3/state.json.tmp"
"$CTL" -T 2 >/dev/null
check "a symbolic link left as the temporary file is not written through" \
  [ "$(cat "$T/victim")" = victim ]
check "... the state file is written: a regular file of the scheduler's, 0600" \
  sh -c "[ -f '$D3/state.json' ] && [ ! -L '$D3/state.json' ] && [ \"\$(stat -c '%u %a' '$D3/state.json')\" = '0 600' ]"
check "... with the change" grep -q '"tq_ms":[[:space:]]*2000' "$D3/state.json"
