#!/usr/bin/env bash
# Made-up GPU UUIDs in ATTACH_GPU (issue 31 item 7, docs/security.md "GPU
# identifiers"). A GPU UUID is a client's claim:
# - with NVML only UUIDs NVML resolves are accepted: 100 made-up ones are
#   refused, the table keeps the node's GPU, a real client attaches;
# - without NVML a learned GPU must look like one (GPU-/MIG- and letters,
#   digits, '-'), a tenant keeps at most 16, a place no client uses goes
#   to the next new GPU when the table (64) is full, and its memory is the
#   smallest its clients report (a forged 1 EiB cannot stop serialization);
# - a newline in a UUID never makes a log line of its own.
# Attackers run as uids 65534.. (other tenants than the honest uid 0
# client, whose lock waits are checked beside the flood).
# shellcheck disable=SC1091,SC2154 # libs by path; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"
FORGE=$NVS_ROOT/tests/security/forge.py
if [ ${#NOBODY[@]} = 0 ] || ! setpriv --reuid 65533 --regid 65533 --clear-groups true 2>/dev/null; then
  ok "# SKIP needs root and setpriv (attackers are other uids)"; exit 0
fi
# exec: under bg the subshell becomes the process, so cleanup kills it (a
# plain call left setpriv's child running after the test: it was not in
# _pids).
as_uid() { local u=$1; shift; exec setpriv --reuid "$u" --regid "$u" --clear-groups "$@"; }
SOCK=$NVSHARE_SOCK_DIR/scheduler.sock
# gpus_py EXPR: a Python expression over the status's GPU list (g).
gpus_py() { status_json | python3 -c 'import json,sys; g = json.load(sys.stdin)["gpus"]; print(eval(sys.argv[1]))' "$1"; }

# ---- with NVML (the simulated GPU): only the node's GPUs ----
start_scheduler --mode on || { not_ok "scheduler starts"; exit 1; }
U=$(gpus_py 'g[0]["uuid"]')
fc H --name honest --gpu-uuid "$U" --alloc 1Gi --script "$(honest_script 300)"
rtt_start H
out=$(as_uid 65534 "$HPY" "$FORGE" "$SOCK" uuids 100 GPU-madeup)
diag "forger: $out"
check "NVML: 100 made-up UUIDs refused (ATTACHED accepted=0 refused=100)" \
  test "$out" = "ATTACHED accepted=0 refused=100"
check "... the table holds the node's one GPU only" test "$(gpus_py 'len(g)')" = 1
check "... a refusal closes the connection, saying why (conn_closed bad-attach, rate-limited)" \
  has_event conn_closed reason='"bad-attach"'
wait_exit 60 "$PID_H"
check "an honest client on the real GPU finished 300 lock cycles (rc $RC)" test "$RC" = 0
check_p99 H "beside 100 made-up UUIDs (NVML)"
check_rss "NVML"
kill -TERM "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null
mv "$T/scheduler.log" "$T/scheduler-nvml.log"; mv "$NVSHARE_EVENTS" "$T/events-nvml.jsonl"

# ---- without NVML: learned GPUs, bounded ----
start_scheduler --no-nvml --reserve 0 || { not_ok "scheduler (no NVML) starts"; exit 1; }
touch "$T/hold0"
out=$(as_uid 65534 "$HPY" "$FORGE" "$SOCK" uuids 64 GPU-a --until "$T/hold0" | head -1)
diag "one tenant, 64 made-up UUIDs: $out"
check "no NVML: one tenant gets 16 learned GPUs, the other 48 refused" \
  test "$out" = "ATTACHED accepted=16 refused=48"
fc R --name real --gpu-uuid GPU-5e1f0000-0000-4000-8000-0000000000aa --alloc 1Gi \
  --script 'lock;release;stay'
check "... a real application's ATTACH is accepted beside it (another tenant)" \
  wait_ev 10 R 'LOCK_OK|GPU_MODE gpu=0 value=0'
# Four tenants fill the table (16 each: 64), then go away: the places are
# free again, and a new GPU takes one (a forgotten learned GPU).
kill "$PID_R" 2>/dev/null; wait "$PID_R" 2>/dev/null
rm -f "$T/hold0"
for u in 65534 65533 65532 65531; do
  rm -f "$T/go$u"
  bg as_uid "$u" "$HPY" "$FORGE" "$SOCK" uuids 16 "GPU-u$u" --until "$T/go$u" >"$T/F$u.out" 2>&1
done
for u in 65534 65533 65532 65531; do
  wait_for "$(scaled 20)" grep -q ATTACHED "$T/F$u.out"
done
check "four tenants, 16 learned GPUs each: the table is full (64)" test "$(gpus_py 'len(g)')" = 64
fc X --name late --gpu-uuid GPU-late --alloc 1Gi --script 'wait CLOSED 30s'
check "... while they use them a fifth new GPU is refused (table full)" \
  wait_ev 10 X 'CLOSED|EXIT'
for u in 65534 65533 65532 65531; do touch "$T/go$u"; done
# They are gone once their GPUs have no client attached.
no_attached() { [ "$(gpus_py 'sum(x["clients"] for x in g)')" = 0 ]; }
check "the four tenants left (no GPU has a client)" wait_for "$(scaled 20)" no_attached
fc N --name newgpu --gpu-uuid GPU-new --alloc 1Gi --script 'lock;release;stay'
check "after they left, a new GPU is accepted in a full table" \
  wait_ev 10 N 'LOCK_OK|GPU_MODE gpu=[0-9]+ value=0'
check "... taking the place of a learned GPU no client used (gpu_forgotten)" \
  wait_event 5 gpu_forgotten
check "... the table still has 64 places, GPU-new in one" \
  test "$(gpus_py 'len(g), sum(x["uuid"] == "GPU-new" for x in g)')" = "(64, 1)"
check_rss "learned GPUs"
kill -TERM "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null
mv "$T/scheduler.log" "$T/scheduler-learned.log"; mv "$NVSHARE_EVENTS" "$T/events-learned.jsonl"

# ---- a forged 1 EiB total does not stop serialization ----
start_scheduler --no-nvml --reserve 0 || { not_ok "scheduler (total) starts"; exit 1; }
G=GPU-5e1f0000-0000-4000-8000-0000000000bb
bg as_uid 65534 "$FC" --name big --gpu-uuid "$G" --total $((1 << 60)) --alloc 10Gi --script stay >"$T/E.out" 2>&1
wait_for 10 grep -q READY "$T/E.out"
fc H2 --name honest --gpu-uuid "$G" --total 16Gi --alloc 10Gi --script 'stay'
check "1 EiB and 16 GiB reported: the GPU's memory is 16 GiB (the smallest report)" \
  wait_for 10 sh -c "[ \"\$('$CTL' --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"gpus\"][0][\"total_memory\"])')\" = $((16 << 30)) ]"
check "... so 20 GiB of claims serialize it" test "$(gpus_py 'g[0]["serialized"]')" = True
kill -TERM "$SCHED_PID"; wait "$SCHED_PID" 2>/dev/null
mv "$T/scheduler.log" "$T/scheduler-total.log"

# ---- a newline in a UUID: one line in the log, never a forged one ----
start_scheduler --no-nvml || { not_ok "scheduler (log) starts"; exit 1; }
forged=$'GPU-x\n[nvshare][scheduler] 2030-01-01T00:00:00.000Z INFO forged line'
out=$(as_uid 65534 "$HPY" "$FORGE" "$SOCK" uuid "$forged")
check "a UUID with a newline is refused (malformed)" test "$out" = REFUSED
wait_for 5 grep -q 'refused: malformed UUID' "$T/scheduler.log"
check "... the refusal is logged on one line, the newline as '?'" \
  grep -qF 'GPU "GPU-x?[nvshare][scheduler] 2030-01-01T00:00:00.000Z INFO forged line" refused: malformed UUID' "$T/scheduler.log"
check "... and no line of the log starts with the forged text" \
  sh -c "! grep -q '^\[nvshare\]\[scheduler\] 2030-01-01' '$T/scheduler.log'"
check_rss "log"
check "scheduler healthy" sched_alive
