#!/usr/bin/env bash
# nvs-test: long (boots systemd in a container: ~10-20 s, and waits for a watchdog)
# The systemd unit really starts the scheduler (issue 34, item 1): `make
# install` into a staging root, then a real systemd (this machine's, from
# Debian's systemd package) boots as PID 1 of a systemd-nspawn container
# whose /usr is the host's (read-only), /usr/local the staged install, /etc
# a minimal one with the unit enabled, and private network, PID, mount and
# IPC namespaces. In there: the unit, hardened as installed, reaches
# "active" (Type=notify: only once both sockets listen), nvsharectl answers
# on the admin socket (0700 directory), a CUDA application with the
# installed library registers with it, journald files the scheduler's
# warnings at warning priority, the loop feeds the watchdog, and systemd
# restarts the scheduler after a SIGKILL and after a stalled loop (SIGSTOP:
# the watchdog fires). Before the fix the unit could not create
# /var/run/nvshare-admin under ProtectSystem=strict and looped on exit 1.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$NVS_ROOT" || exit 1
. "$(dirname "$0")/nspawn_lib.sh"
nspawn_require
done_() { nspawn_done; }

# 1. Install as an operator would.
R=$T/root
ART=(libnvshare.so nvshare-scheduler nvsharectl nvshare-device-plugin)
o=(); for a in "${ART[@]}"; do o+=(-o "$B/$a"); done
make -s --no-print-directory B="$B" MAN_BUILD="$T/man" "${o[@]}" install DESTDIR="$R" >"$T/install.log" 2>&1 ||
  { not_ok "make install"; sed 's/^/# /' "$T/install.log"; done_; }

# 2. The container: /usr from the host (read-only), /usr/local the staged
# install, the unit enabled as `systemctl enable` would.
nspawn_image
NSPAWN_MOUNTS+=("mount --bind $R/usr/local $I/usr/local")
U=usr/local/lib/systemd/system/nvshare-scheduler.service
ln -s "/$U" "$I/etc/systemd/system/nvshare-scheduler.service"
ln -s "/$U" "$I/etc/systemd/system/multi-user.target.wants/nvshare-scheduler.service"
# Settings as an operator sets them (the unit's EnvironmentFile): a
# --proc-root other than /proc is a start-up warning, which the journal
# must file at warning priority.
printf '# test settings\nNVSHARE_PROC_ROOT=/proc/.\n' >"$I/etc/default/nvshare-scheduler"
# A short watchdog for the stall check (the unit's own is 30 s).
mkdir -p "$I/etc/systemd/system/nvshare-scheduler.service.d"
printf '[Service]\nWatchdogSec=4s\n' >"$I/etc/systemd/system/nvshare-scheduler.service.d/test.conf"
nspawn_boot --bind-ro="$B"
nspawn_wait_running

show() { in_c systemctl show -P "$1" nvshare-scheduler; }
check "nvshare-scheduler.service is active (running)" \
  wait_for "$(scaled 30)" bash -c "[ \"\$(nsenter -a -t $L systemctl is-active nvshare-scheduler)\" = active ]"
sub=$(show SubState); typ=$(show Type); wd=$(show WatchdogUSec)
check "started as Type=notify (READY=1 after its sockets: $typ/$sub), watchdog $wd" \
  bash -c "[ '$typ' = notify ] && [ '$sub' = running ] && [ '$wd' = 4s ]"
check "hardened as installed (ProtectSystem=strict, no capabilities, NoNewPrivileges)" bash -c "
  [ \"\$(nsenter -a -t $L systemctl show -P ProtectSystem nvshare-scheduler)\" = strict ] &&
  [ -z \"\$(nsenter -a -t $L systemctl show -P CapabilityBoundingSet nvshare-scheduler)\" ] &&
  [ \"\$(nsenter -a -t $L systemctl show -P NoNewPrivileges nvshare-scheduler)\" = yes ]"
perms=$(in_c stat -c '%n %a' /run/nvshare /run/nvshare/scheduler.sock /run/nvshare-admin /run/nvshare-admin/admin.sock 2>&1 | tr '\n' ' ')
check "sockets: client 0755/0666, admin 0700/0600 ($perms)" \
  bash -c "[ '$perms' = '/run/nvshare 755 /run/nvshare/scheduler.sock 666 /run/nvshare-admin 700 /run/nvshare-admin/admin.sock 600 ' ]"
in_c nvsharectl --json >"$T/status.json" 2>"$T/ctl.err"
check "nvsharectl answers on the admin socket" bash -c "[ -s '$T/status.json' ] && jq -e .gpus '$T/status.json' >/dev/null"

# A CUDA application (the simulated GPU) with the installed library: it
# registers (HELLO), holds the GPU while it runs and leaves.
in_c mkdir -p /tmp/sim
in_c env NVSHARE_SIM_STATE_DIR=/tmp/sim LD_LIBRARY_PATH="$B/tests/sim" \
  LD_PRELOAD=/usr/local/lib/libnvshare.so NVSHARE_REQUIRE_SCHEDULER=1 \
  "$B/tests/e2e/sim_app" --name unit-app --alloc 64Mi --kernels 20 --kernel-us 2000 --idle-after 10 --hold --report progress \
  >"$T/app.out" 2>"$T/app.err" &
APP=$!
_pids+=("$APP")
check "the application runs its first kernels through the unit's scheduler" \
  wait_for "$(scaled 30)" grep -q '^PROGRESS' "$T/app.out"
registered() { [ "$(in_c nvsharectl --json | jq '[.clients[]? | select(.claimed_name == "sim_app")] | length')" -ge 1 ]; }
check "... and is registered (nvsharectl --json lists it)" wait_for "$(scaled 20)" registered
check "... without a 'not reachable' warning" bash -c "! grep -qi 'not reachable\|ungated\|refused' '$T/app.err'"
in_c nvsharectl --json >"$T/status2.json" 2>&1
jq -e '.clients | length > 0' "$T/status2.json" >/dev/null 2>&1 || { diag "status: $(head -c 600 "$T/status2.json")"; tail -3 "$T/app.out" "$T/app.err" | sed 's/^/# /'; }
kill -TERM "$APP" 2>/dev/null; in_c pkill -TERM -x sim_app 2>/dev/null

# journald: the scheduler's lines carry their priority (log.c, JOURNAL_STREAM).
in_c journalctl -u nvshare-scheduler -p warning -o cat --no-pager >"$T/warn.txt" 2>&1
in_c journalctl -u nvshare-scheduler -o json --no-pager >"$T/journal.json" 2>&1
check "journalctl -p warning lists the start-up warning (--proc-root)" grep -q 'peer identities are read from /proc/.' "$T/warn.txt"
check "... and not the INFO lines" bash -c "! grep -q 'starting: mode' '$T/warn.txt'"
check "INFO lines are filed at priority 6, without the <6> prefix in the message" \
  bash -c "jq -r 'select(.MESSAGE | tostring | test(\"starting: mode\")) | .PRIORITY + \" \" + (.MESSAGE | tostring)' '$T/journal.json' | grep -q '^6 \[nvshare\]'"

# The watchdog is fed by the loop (its timestamp advances).
w1=$(show WatchdogTimestampMonotonic)
check "the event loop feeds the watchdog" \
  wait_for "$(scaled 10)" bash -c "[ \"\$(nsenter -a -t $L systemctl show -P WatchdogTimestampMonotonic nvshare-scheduler)\" -gt '${w1:-0}' ]"

# Restart after a crash (SIGKILL).
p1=$(show MainPID); n1=$(show NRestarts)
in_c kill -KILL "$p1"
restarted() {
  local p; p=$(nsenter -a -t "$L" systemctl show -P MainPID nvshare-scheduler)
  [ "$p" != 0 ] && [ "$p" != "$1" ] && [ "$(nsenter -a -t "$L" systemctl is-active nvshare-scheduler)" = active ]
}
check "restarted after SIGKILL (pid $p1 -> a new one, active again)" wait_for "$(scaled 30)" restarted "$p1"
check "... counted (NRestarts $n1 -> $(show NRestarts))" [ "$(show NRestarts)" -gt "${n1:-0}" ]
in_c nvsharectl --json >/dev/null 2>&1
check "nvsharectl answers the restarted scheduler" [ $? -eq 0 ]

# A stalled loop: SIGSTOP. The watchdog (4 s here) fires, systemd kills it
# (SIGABRT) and starts a new one.
p2=$(show MainPID)
in_c kill -STOP "$p2"
check "a stopped scheduler is killed by the watchdog and restarted" wait_for "$(scaled 60)" restarted "$p2"
check "... and the journal says the watchdog did it" \
  bash -c "nsenter -a -t $L journalctl -u nvshare-scheduler -o cat --no-pager | grep -qi 'watchdog timeout'"

in_c systemctl stop nvshare-scheduler
check "systemctl stop: inactive, the client socket gone (sockets removed on exit)" \
  bash -c "[ \"\$(nsenter -a -t $L systemctl is-active nvshare-scheduler)\" = inactive ] && ! nsenter -a -t $L test -S /run/nvshare/scheduler.sock"
nspawn_stop
done_
