#!/usr/bin/env bash
# Nobody acts for someone else. Identity is SO_PEERCRED's; a message's
# local_gpu is a key into the SENDER's own attachments, so a second
# connection that sends LOCK_RELEASED / REQ_LOCK / MEM_UPDATE "for GPU 0"
# while another client holds GPU 0 only affects itself. The tenant status
# (client socket, nvsharectl --tenant) of a caller outside Kubernetes shows
# only the clients of its own uid. (Control refused on the client socket:
# tests/security/t_sockets.sh; Pods: tests/security/t_tenant_status.sh.)
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"

start_scheduler --no-nvml --mode on || { not_ok "scheduler starts"; exit 1; }
fc A --name victim --gpu-uuid GPU-iso --alloc 1Gi --script 'lock;hold 3s;release;hold 100ms'
check "A holds GPU-iso" wait_ev 5 A LOCK_OK
# B: same GPU, its own local ordinal 0 - the same number A uses.
fc B --name intruder --gpu-uuid GPU-iso --alloc 2Gi --script 'release;idle_release;mem 8Gi;req;hold 1s;release;hold 200ms'
wait_ev 5 B 'SENT REQ_LOCK'
# B's messages are handled in order: its queued REQ_LOCK (the last) proves
# the scheduler has handled the ones before.
check "the scheduler handled B's messages (its req_lock event)" \
  wait_event 10 req_lock client=2 pid="$PID_B"
check "B's LOCK_RELEASED for 'GPU 0' is its own, ignored (B holds nothing)" \
  has_event lock_release_ignored client=2 pid="$PID_B" gpu=0 reason='"not-holder"'
json=$("$CTL" --json)
check "A is still the holder" grep -qE '"holder":\{"client":1,' <<<"$json"
a_json=$(grep -oE "\"pid\":$PID_A,\"uid\".*" <<<"$json")
check "B's MEM_UPDATE changed only B's memory (A still 1Gi, B 8Gi)" \
  sh -c "echo '$a_json' | grep -qE '\"allocated\":1073741824' && echo '$json' | grep -qF '\"allocated\":8589934592'"
check "B's REQ_LOCK queued B behind A, did not take the lock" has_event req_lock client=2 pid="$PID_B" gpu=0 holder=1
# (A was still the holder in the status read after B's REQ_LOCK)
check "B got no LOCK_OK while A held" test "$(count_events lock_ok client=2)" = 0
# C: another GPU attached as its ordinal 0, releasing "GPU 0".
fc C --gpu-uuid GPU-other --script 'release;hold 100ms'
wait_exit 5 "$PID_C"
# Its connection's end (bye) comes after every message it sent.
wait_event 5 bye client=3 pid="$PID_C"
check "C's release applies to its own GPU (GPU-other), ignored there" \
  has_event lock_release_ignored client=3 pid="$PID_C" gpu=1
# D: a message for an ordinal it never attached: closed, nothing else touched.
fc D --gpu-uuid GPU-other --script 'raw notattached;wait CLOSED 2s'
wait_exit 5 "$PID_D"
check "D (unattached ordinal) is disconnected" has_event conn_closed pid="$PID_D" reason='"gpu-not-attached"'
check "A still holds after all of it" json_has '"holder":{"client":1,'
check "A finishes its hold and releases normally" wait_exit 6 "$PID_A"
check "... exit 0" [ "$RC" = 0 ]

# Identity in the code: pid and uid come from SO_PEERCRED only; HELLO's pid
# is stored as reported_pid and used for display only.
check "no decision uses the client-reported pid (audit)" \
  sh -c "! grep -nE 'reported_pid' '$NVS_ROOT'/scheduler/*.c | grep -vE 'status_json.c|metrics.c|reported_pid = h->client_pid|display only'"

chmod 755 "$T"
if setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
  nob() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
  # Both stay until the checks are done (a fixed 3 s ran out before the
  # last of them in an ASan soak round beside burners).
  fc R --name rootjob --gpu-uuid GPU-iso --script "until $T/iso-done"
  bg nob "$FC" --name nobodyjob --gpu-uuid GPU-iso --script "until $T/iso-done" >"$T/N.out" 2>&1
  check "both clients registered" wait_for "$(scaled 10)" sh -c "grep -q READY '$T/R.out' && grep -q READY '$T/N.out'"
  js=$(nob "$CTL" --tenant --json); rc=$?
  check "uid 65534 reads its tenant status" [ "$rc" = 0 ]
  check "... sees its own client (claimed name)" grep -q '"claimed_name":"nobodyjob"' <<<"$js"
  check "... not root's clients: no name, no pid, no uid 0" \
    sh -c "! echo '$js' | grep -qE 'rootjob|victim|\"uid\":0|\"pid\":$PID_R'"
  check "... exactly one client, of uid 65534" \
    sh -c "echo '$js' | python3 -c 'import json,sys; c=json.load(sys.stdin)[\"clients\"]; sys.exit(not (len(c)==1 and c[0][\"uid\"]==65534))'"
  check "... and no GPU holder, queue or allocation totals" \
    sh -c "! echo '$js' | grep -qE '\"holder\"|\"queue\"|\"allocated\":[0-9]+,\"clients\"'"
  check "root sees every name (admin socket)" sh -c "$CTL --json | grep -q rootjob && $CTL --json | grep -q nobodyjob"
  check "the table view renders the tenant view" sh -c "nob() { setpriv --reuid=65534 --regid=65534 --clear-groups \"\$@\"; }; nob $CTL --tenant | grep -q 'tenant view for uid 65534'"
  touch "$T/iso-done"
else
  for _ in 1 2 3 4 5 6 7 8; do ok "unprivileged status # skip setpriv cannot drop privileges here"; done
fi
check "scheduler healthy" sched_alive
