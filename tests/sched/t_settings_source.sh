#!/usr/bin/env bash
# Where each setting comes from (docs/scheduler.md "Where a setting comes
# from"; issue 34 items 4 and 5): every setting shows its value and its
# source (default, environment, flag, state-file, nvsharectl) in
# nvsharectl --settings and --json; run-time values are checked as
# configured ones are (--capacity 1Ti on the simulated 16Gi GPU is refused
# like the flag); -T default and --reset return to the configured value;
# a saved value is restored over an unchanged configuration (logged with
# both values), and loses to a changed one (logged, dropped); a saved
# capacity above the GPU's memory is not restored.
# shellcheck disable=SC1091,SC2016,SC2154 # libs by path; inner scripts; lib variables
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"
SF=$NVSHARE_STATE_FILE
LOG=$T/scheduler.log
# js EXPR: EXPR in Python over the admin status (j), printed.
js() {
  "$CTL" --json | python3 -c 'import json, sys
j = json.load(sys.stdin)
print(eval(sys.argv[1]))' "$1"
}
# set_is NAME VALUE SOURCE: the setting's value in force (its text) and source.
set_is() { [ "$(js "j['settings']['$1']['text'] + ' ' + j['settings']['$1']['source']")" = "$2 $3" ]; }
# sf EXPR: EXPR in Python over the state file (j), printed.
sf() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$SF" "$1"; }
stop_sched() { kill -TERM "$SCHED_PID" && wait_exit 10 "$SCHED_PID"; }
# ctl_out ARGS...: nvsharectl's exit status in RC, its output in $T/ctl.out.
ctl_out() { "$CTL" "$@" >"$T/ctl.out" 2>&1; RC=$?; }
sched() { NVSHARE_TQ=2 start_scheduler --no-kube --mode on "$@"; }

sched || { not_ok "scheduler starts"; cat "$LOG"; exit 1; }
check "tq 2s from the environment (NVSHARE_TQ=2)" set_is tq 2s environment
check "mode on from the flag" set_is mode on flag
check "reserve 512Mi by default" set_is reserve 512Mi default
check "kube off from the flag --no-kube" set_is kube off flag
check "state-file from the environment (the test's own)" set_is state-file "$SF" environment
check "--json: tq's value is a number (ms), its variable named, run time per GPU" \
  [ "$(js "(j['settings']['tq']['value'], j['settings']['tq']['env'], j['settings']['tq']['runtime'])")" = "(2000, 'NVSHARE_TQ', 'gpu')" ]
check "GPU 0 follows the settings for all GPUs" \
  [ "$(js "j['gpus'][0]['sources']")" = "{'mode': 'all-gpus', 'tq': 'all-gpus', 'capacity': 'all-gpus'}" ]
"$CTL" --settings >"$T/settings.txt"
check "nvsharectl --settings: tq 2s environment" grep -qE '^tq +2s +environment +2s \(environment\)' "$T/settings.txt"
check "nvsharectl --settings lists every setting (the table has 50)" [ "$(grep -c . "$T/settings.txt")" -ge 51 ]
"$CTL" >"$T/status.txt"
check "the status names the settings not at their defaults, with sources" \
  grep -qE 'settings not at their defaults:.* mode on \(flag\).* tq 2s \(environment\)' "$T/status.txt"

# ---- run-time values are checked as configured ones ----
ctl_out --capacity 1Ti
check "--capacity 1Ti on a 16Gi GPU is refused (exit $RC), as the flag would be" \
  sh -c "[ $RC = 1 ] && grep -q 'capacity 1Ti for GPU 0 is more than its memory 16Gi' '$T/ctl.out'"
ctl_out -g 0 --capacity 17Gi
check "... for one GPU too (exit $RC)" sh -c "[ $RC = 1 ] && grep -q 'more than its memory' '$T/ctl.out'"
check "... and nothing was saved" [ ! -e "$SF" ]
check "capacity still as configured" set_is capacity auto default
"$CTL" --capacity 8Gi >/dev/null
check "--capacity 8Gi is taken: from nvsharectl" set_is capacity 8Gi nvsharectl

# ---- back to the configuration ----
"$CTL" -T 0.5 >/dev/null
check "-T 0.5: tq 500ms from nvsharectl" set_is tq 500ms nvsharectl
check "... the configured value shown beside it" \
  [ "$(js "j['settings']['tq']['configured_text'] + ' ' + j['settings']['tq']['configured_source']")" = "2s environment" ]
check "... saved, with the configuration it was set against" [ "$(sf "(j['all']['tq_ms'], j['configured']['tq'])")" = "(500, '2000')" ]
ctl_out -T default
check "-T default (exit $RC): back to the configured 2s, named" \
  sh -c "[ $RC = 0 ] && grep -q 'tq back to its configured value 2s (NVSHARE_TQ)' '$T/ctl.out'"
check "... tq 2s from the environment again" set_is tq 2s environment
check "... and forgotten by the state file" [ "$(sf "'tq_ms' in j['all']")" = False ]
"$CTL" -g 0 -T 0.3 >/dev/null
check "-g 0 -T 0.3: GPU 0's own TQ, from nvsharectl" \
  [ "$(js "(j['gpus'][0]['tq_ms'], j['gpus'][0]['sources']['tq'])")" = "(300, 'nvsharectl')" ]
check "nvsharectl --settings shows GPU 0's own TQ" sh -c "'$CTL' --settings | grep -qx 'GPU 0: tq 300ms (nvsharectl)'"
"$CTL" -g 0 --reset tq >/dev/null
check "--reset tq -g 0: GPU 0 follows the TQ for all GPUs again" \
  [ "$(js "(j['gpus'][0]['tq_ms'], j['gpus'][0]['sources']['tq'])")" = "(2000, 'all-gpus')" ]
ctl_out --reset bogus
check "--reset bogus: exit 2 ($RC), naming the run-time settings" \
  sh -c "[ $RC = 2 ] && grep -q 'expected one of mode, tq, capacity, idle-release-ms, or all' '$T/ctl.out'"
"$CTL" -S off >/dev/null && "$CTL" --idle-release 40 >/dev/null
ctl_out --reset all
check "--reset all (exit $RC): mode, capacity, idle release as configured" \
  sh -c "[ $RC = 0 ] && [ \"\$(grep -c 'back to its configured value' '$T/ctl.out')\" = 4 ]"
check "... mode on (flag)" set_is mode on flag
check "... capacity auto (default)" set_is capacity auto default
check "... idle release 20ms (default)" set_is idle-release-ms 20ms default
check "... the state file keeps nothing for all GPUs" [ "$(sf "j['all']")" = "{}" ]

# ---- a restart: a saved value over an unchanged configuration ----
"$CTL" -T 0.5 >/dev/null
stop_sched || not_ok "scheduler stops"
sched || { not_ok "scheduler restarts"; cat "$LOG"; exit 1; }
check "restart, same configuration: tq 500ms restored, from the state file" set_is tq 500ms state-file
check "... logged at WARN with both values and the way back" \
  log_has "$LOG" 'WARN.*tq 500ms restored over the configured 2s (NVSHARE_TQ).*nvsharectl --reset tq'
check "... state_loaded: restored 1 setting, none dropped" \
  wait_event 5 state_loaded result='"restored"' settings=1 dropped=0

# ---- ... and under a changed configuration: the configuration wins ----
stop_sched || not_ok "scheduler stops"
sched --tq 3 || { not_ok "scheduler restarts with --tq 3"; cat "$LOG"; exit 1; }
check "restart with --tq 3: the flag wins over the saved 500ms" set_is tq 3s flag
check "... logged at WARN, naming the flag" \
  log_has "$LOG" 'WARN.*tq 500ms was set at run time.*the configuration now says 3s (the flag --tq) and wins'
check "... state_loaded: 1 dropped" wait_event 5 state_loaded result='"restored"' settings=0 dropped=1
check "... the saved value is gone from the file, the new configuration recorded" \
  [ "$(sf "('tq_ms' in j['all'], j['configured']['tq'])")" = "(False, '3000')" ]

# ---- a file without the record (an older scheduler's): restored, said so ----
stop_sched || not_ok "scheduler stops"
printf '{"version": 1, "all": {"tq_ms": 700}}' >"$SF"
sched || { not_ok "scheduler starts with an older file"; cat "$LOG"; exit 1; }
check "an older file's TQ is restored" set_is tq 700ms state-file
check "... with a WARN saying it has no record of the configuration" \
  log_has "$LOG" 'tq 700ms restored over the configured 2s.*does not say against which configuration'

# ---- a saved capacity above the GPU's memory is not restored ----
stop_sched || not_ok "scheduler stops"
printf '{"version": 1, "all": {"capacity": "%s"}}' $((1 << 40)) >"$SF"
sched || { not_ok "scheduler starts with a saved 1Ti capacity"; cat "$LOG"; exit 1; }
# (checked when the GPU is found, after the sockets are up: waited for)
check "a saved 1Ti capacity on the 16Gi GPU: not restored, logged" \
  log_has "$LOG" 'ERROR.*capacity 1Ti for GPU 0 is more than its memory 16Gi.*not restored'
check "... the configured capacity applies (memory - reserve)" \
  [ "$(js "(j['gpus'][0]['capacity'], j['settings']['capacity']['source'])")" = "($(((16 << 30) - (512 << 20))), 'default')" ]
check "... and the file forgets it" [ "$(sf "'capacity' in j['all']")" = False ]
