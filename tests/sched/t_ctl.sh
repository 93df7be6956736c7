#!/usr/bin/env bash
# nvsharectl: status table and JSON content, settings, client limits
# (SET_LIMITS forwarded), refusal for unprivileged callers, error messages
# and exit codes. nvsharectl uses the admin socket ($NVSHARE_ADMIN_SOCK_DIR,
# tests/lib.sh); the client socket's refusals are in tests/security.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/sched_lib.sh"

out=$("$CTL" 2>&1); rc=$?
check "no scheduler: exit 1" test "$rc" = 1
check "no scheduler: names the socket path it tried (the admin socket)" \
  sh -c 'echo "$0" | grep -qF "$1/admin.sock" && echo "$0" | grep -q "not running"' "$out" "$NVSHARE_ADMIN_SOCK_DIR"
out=$("$CTL" --tenant 2>&1); rc=$?
check "no scheduler, --tenant: exit 1, names the client socket" \
  sh -c 'test "$2" = 1 && echo "$0" | grep -qF "$1/scheduler.sock"' "$out" "$NVSHARE_SOCK_DIR" "$rc"

start_scheduler --no-nvml --mode on --tq 45s
fc A --name trainer --gpu-uuid GPU-ctl-0 --alloc 2Gi --total 16Gi --script 'lock;wait SET_LIMITS 10s;wait SET_LIMITS 10s;hold 5s'
wait_ev 5 A LOCK_OK
# B has no core limit: a limited waiter would take the lock from A at once
# (compute quotas, docs/quotas.md; tested in tests/quota).
fc B --name infer --gpu-uuid GPU-ctl-0 --alloc 1Gi --mem-limit 3Gi --script 'lock;hold 5s'
wait_event 5 req_lock client=2

table=$("$CTL"); rc=$?
diag "$(echo "$table" | sed 's/^/  /')"
check "status table: exit 0" test "$rc" = 0
check "table: GPU row with mode, TQ, holder and queue" \
  sh -c 'echo "$0" | grep -qE "^0 +on +yes +45.0s .* 1/$1 .* 2/$2"' "$table" "$PID_A" "$PID_B"
check "table: holder client row" sh -c 'echo "$0" | grep -qE "^1 +$1 +0 +trainer +0 +2Gi +holding"' "$table" "$PID_A"
check "table: waiting client row with limits" \
  sh -c 'echo "$0" | grep -qE "^2 +$1 +0 +infer +0 +1Gi +waiting .* 100%, 3Gi"' "$table" "$PID_B"

j=$("$CTL" --json); rc=$?
check "--json: exit 0" test "$rc" = 0
for k in '"index":0' '"uuid":"GPU-ctl-0"' '"mode":"on"' '"serialized":true' '"tq_ms":45000' \
         '"total_memory":17179869184' '"allocated":3221225472' "\"holder\":{\"client\":1,\"pid\":$PID_A" \
         "\"queue\":[{\"client\":2,\"pid\":$PID_B" '"handoffs":0' '"revocations":0' \
         "\"pid\":$PID_B,\"uid\":0" '"claimed_name":"infer"' '"state":"waiting"' '"state":"holding"' \
         '"core_limit":100' '"mem_limit":3221225472' '"held_ns":' '"wait_hist":['; do
  check "--json has $k" sh -c 'echo "$0" | grep -qF -- "$1"' "$j" "$k"
done

# Client limits, forwarded as SET_LIMITS.
out=$("$CTL" --set-client "$PID_A" --core-limit 50 --memory-limit 4Gi); rc=$?
check "--set-client accepted ($out)" test "$rc" = 0
check "client got SET_LIMITS 50%, 4Gi" wait_ev 3 A "SET_LIMITS gpu=0 core_limit=50 mem_limit=$((4 << 30))"
"$CTL" --set-client "$PID_A" --memory-limit none >/dev/null
check "--memory-limit none sends no limit" wait_ev 3 A "SET_LIMITS gpu=0 core_limit=50 mem_limit=18446744073709551615"
"$CTL" --set-client 999999 --core-limit 10 >/dev/null 2>"$T/err"; rc=$?
check "--set-client unknown pid: exit 1 with message" sh -c "test $rc = 1 && grep -q 'no client with pid 999999' '$T/err'"

# Bad values and usage.
for args in "-S maybe" "-T abc" "--capacity lots" "--set-client 1" "--core-limit 5" "--bogus" "-g x -S on"; do
  "$CTL" $args >/dev/null 2>&1; rc=$?
  check "usage error for '$args': exit 2" test "$rc" = 2
done
"$CTL" -g 7 -S on >/dev/null 2>"$T/err"; rc=$?
check "unknown GPU index: exit 1, says so" sh -c "test $rc = 1 && grep -q 'no GPU 7' '$T/err'"
check "--help: exit 0" "$CTL" --help

# Unprivileged callers: the admin socket is closed to them (0600 in a 0700
# directory); the tenant status through the client socket is open.
chmod 755 "$T"
if setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
  nob() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
  nob "$CTL" --tenant >/dev/null 2>&1; rc=$?
  check "uid 65534 may read its tenant status (--tenant)" test "$rc" = 0
  out=$(nob "$CTL" -S off 2>&1); rc=$?
  check "uid 65534 may not change the mode: exit 1" test "$rc" = 1
  check "refusal says permission denied, names the admin socket and what to do" \
    sh -c 'echo "$0" | grep -q "permission denied" && echo "$0" | grep -qF "$1/admin.sock" && echo "$0" | grep -q "kubectl exec"' "$out" "$NVSHARE_ADMIN_SOCK_DIR"
  nob "$CTL" --set-client "$PID_A" --core-limit 1 >/dev/null 2>&1; rc=$?
  check "uid 65534 may not set client limits" test "$rc" = 1
  nob "$CTL" --tenant -S off >/dev/null 2>&1; rc=$?
  check "... nor through the client socket (--tenant): exit 1" test "$rc" = 1
  check "that refusal is in the events with the caller's uid" \
    wait_event 3 ctl_refused uid=65534 msg='"CTL_SET"' socket='"client"'
  check "mode unchanged after refusal" json_has '"mode":"on"'
else
  for _ in 1 2 3 4 5 6 7; do ok "unprivileged control # skip setpriv cannot drop privileges here"; done
fi
