#!/usr/bin/env bash
# Two sockets, two audiences (docs/security.md). On the client socket
# (mounted into every Pod) a root peer - the scheduler's own uid here -
# cannot change any setting or any client's limits, its own included: every
# control message is refused with an error that names the admin socket. The
# admin socket (0600 in a 0700 directory) does it all, refuses a root peer
# in a Pod other than the scheduler's own, and serves no GPU client. Both
# are re-created when removed.
# shellcheck disable=SC1091,SC2016,SC2119,SC2154 # libs by path; inner sh -c scripts; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
. "$(dirname "$0")/sec_lib.sh"
ADMIN=$NVSHARE_ADMIN_SOCK_DIR/admin.sock
UA=0a1b2c3d-0000-4000-8000-00000000000a
US=0a1b2c3d-0000-4000-8000-00000000005c

start_scheduler --no-nvml --no-kube --mode on --tq 30s --proc-root "$PROC" ||
  { not_ok "scheduler starts"; exit 1; }
check "admin directory is 0700, owned by the scheduler's uid" \
  test "$(stat -c '%a %u' "$NVSHARE_ADMIN_SOCK_DIR")" = "700 $(id -u)"
check "admin socket is 0600, owned by the scheduler's uid" test "$(stat -c '%a %u' "$ADMIN")" = "600 $(id -u)"
check "client socket stays 0666 (clients in containers run as any uid)" \
  test "$(stat -c %a "$NVSHARE_SOCK_DIR/scheduler.sock")" = 666

# A client of this very uid, on the client socket (a host process, so the
# tenant status below is its own tenant).
fcpod V "0::/user.slice/user-0.slice/session-1.scope" --name victim --gpu-uuid GPU-sec \
  --alloc 1Gi --script 'wait SET_LIMITS 20s;stay'

# Every control message on the client socket, as root.
n=0
for args in "-S off" "-T 5" "--capacity 1" "--idle-release 0" "-g 0 -S off" \
            "--set-client $PID_V --core-limit 1" "--set-client $PID_V --memory-limit 1" \
            "--set-client $PID_V --core-limit default"; do
  # shellcheck disable=SC2086 # word-split on purpose
  out=$("$CTL" --tenant $args 2>&1); rc=$?
  if [ "$rc" = 1 ] && grep -q "permission denied" <<<"$out" && grep -qF "$ADMIN" <<<"$out"; then
    n=$((n + 1))
  else
    diag "'$args' on the client socket: rc $rc: $out"
  fi
done
check "root on the client socket: all 8 control requests refused, each naming the admin socket" test "$n" = 8
check "... including through --socket with the client socket's path" \
  sh -c "! '$CTL' --socket '$NVSHARE_SOCK_DIR/scheduler.sock' -S off >/dev/null 2>&1"
j=$("$CTL" --json)
check "settings unchanged (mode on, TQ 30 s, capacity auto, idle release 20 ms)" \
  jpy "$j" "j['defaults']['mode']=='on' and j['defaults']['tq_ms']==30000 and j['defaults']['idle_release_ms']==20 and all(g['mode']=='on' and not g['capacity_override'] for g in j['gpus'])"
# Positive marker: the first SET_LIMITS the victim ever gets is the admin's.
out=$("$CTL" --set-client "$PID_V" --core-limit 42 2>&1); rc=$?
check "the admin socket sets the client's limits ($out)" test "$rc" = 0
wait_ev 3 V ' SET_LIMITS '
check "the victim's first SET_LIMITS is the admin's 42 % (none from the refused requests)" \
  sh -c "grep -m1 ' SET_LIMITS ' '$T/V.out' | grep -q 'core_limit=42 '"
"$CTL" -S off -T 5 --idle-release 7 >/dev/null; rc=$?
check "the admin socket changes settings" \
  sh -c "test $rc = 0 && '$CTL' --json | grep -q '\"mode\":\"off\",\"tq_ms\":5000'"
# ctl_refused: 6 CTL_SET (5 above, 1 through --socket) and 3 CTL_SET_CLIENT.
check "each refusal on the client socket is reported (ctl_refused: 6 CTL_SET, 3 CTL_SET_CLIENT)" \
  test "$(count_events ctl_refused uid="$(id -u)" msg='"CTL_SET"' socket='"client"') $(count_events ctl_refused uid="$(id -u)" msg='"CTL_SET_CLIENT"' socket='"client"')" = "6 3"

# Defence in depth: a root peer in a Pod is refused on the admin socket
# (a hostPath mistake, or a Pod given the directory), except in the
# scheduler's own Pod (kubectl exec).
out=$(pod_ctl "$UA" -S on 2>&1); rc=$?
check "root in Pod $UA: admin socket refuses changes (exit 1), says why" \
  sh -c 'test "$1" = 1 && echo "$0" | grep -q "permission denied on the admin socket" && echo "$0" | grep -qF "Pod $2"' "$out" "$rc" "$UA"
pod_ctl "$UA" --json >/dev/null 2>&1; rc=$?
check "... and the full status" test "$rc" = 1
check "... and nothing changed" json_has '"mode":"off"'
unknown_ctl -S on >"$T/unk.out" 2>&1; rc=$?
check "a peer whose cgroup cannot be read is refused on the admin socket" \
  sh -c "test $rc = 1 && grep -q 'cannot tell who you are' '$T/unk.out'"
mkdir -p "$PROC/$SCHED_PID" && cg_systemd_v2 "$US" >"$PROC/$SCHED_PID/cgroup"
out=$(pod_ctl "$US" -S on 2>&1); rc=$?
check "root in the scheduler's own Pod (kubectl exec) may use the admin socket" test "$rc" = 0
out=$(pod_ctl "$UA" -S auto 2>&1); rc=$?
check "... while another Pod still may not (exit 1)" test "$rc" = 1
rm -f "$PROC/$SCHED_PID/cgroup"

# The admin socket serves no GPU client: a HELLO there is disconnected.
mkdir -p "$T/via-admin" && ln -s "$ADMIN" "$T/via-admin/scheduler.sock"
NVSHARE_SOCK_DIR=$T/via-admin "$FC" --gpu-uuid GPU-sec >"$T/A.out" 2>&1; rc=$?
closed_on_admin() { [ "$rc" != 0 ] && wait_event 3 conn_closed reason='"client-msg-on-admin"'; }
check "a client on the admin socket is closed, never served (conn_closed client-msg-on-admin)" closed_on_admin

# Removed, the admin socket is re-created like the client socket.
rm -f "$ADMIN"
check "admin socket re-created after removal" wait_event 3 socket_recreated path="\"$ADMIN\""
check "... with mode 0600, and nvsharectl works again" \
  sh -c "test \"\$(stat -c %a '$ADMIN')\" = 600 && '$CTL' --json >/dev/null"

# Start-up refusals: the admin directory inside the (Pod-mounted) client
# directory, or a directory someone else owns.
"$B/nvshare-scheduler" --no-nvml --no-kube --sock-dir "$T/c2" --admin-sock-dir "$T/c2/admin" \
  >"$T/bad1.log" 2>&1; rc=$?
check "admin directory inside the client directory: exit 2, says why" \
  sh -c "test $rc = 2 && grep -q 'mounted into Pods' '$T/bad1.log'"
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$T/theirs" && chown 65534 "$T/theirs"
  "$B/nvshare-scheduler" --no-nvml --no-kube --sock-dir "$T/c3" --admin-sock-dir "$T/theirs" \
    >"$T/bad2.log" 2>&1; rc=$?
  check "admin directory owned by another uid: refused (exit 1)" \
    sh -c "test $rc = 1 && grep -q 'must be a directory (not a symlink) owned by uid 0' '$T/bad2.log'"
else
  ok "admin directory owned by another uid # skip needs root to chown"
fi
check "scheduler healthy" sched_alive
echo "1..$_tap_n"
