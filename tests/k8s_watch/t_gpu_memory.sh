#!/usr/bin/env bash
# nvshare.com/gpu-memory end to end: a real CUDA client (quota_app under
# libnvshare.so on the simulated GPU) in a fake Pod whose container got 2
# units (2 GiB at the default 1Gi unit) is limited to 2 GiB, seen through
# cuMemGetInfo and NVML, whatever its environment claims; an annotation
# raises the limit and removing it brings the request back. The request is
# also the Pods' expected size when the scheduler decides what fits: two
# Pods that declared more than the GPU holds are serialized before they
# allocate it, and run together again when one Pod is gone.
# shellcheck disable=SC1091,SC2016 # libs by path; inner sh -c scripts
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/k8s_lib.sh"

QAPP=$B/tests/quota/quota_app
GI=$((1 << 30))
UP=0a1b2c3d-0000-4000-8000-0000000000a1 # "train": 2 units
UA=0a1b2c3d-0000-4000-8000-0000000000a2 # "fit-a": 6 units
UB=0a1b2c3d-0000-4000-8000-0000000000a3 # "fit-b": 4 + 2 units in two containers
if ! mkcerts; then not_ok "openssl makes a CA and a server certificate"; exit 1; fi
printf 'token-M\n' >"$T/token"
res() { printf '[{"name":"c","image":"x","resources":{"limits":{"nvshare.com/gpu-memory":"%s"},"requests":{"nvshare.com/gpu-memory":"%s"}}}]' "$1" "$1"; }
cat >"$T/pods.json" <<EOF2
[{"uid":"$UP","name":"train","namespace":"team-m","containers":$(res 2)},
 {"uid":"$UA","name":"fit-a","namespace":"team-m","containers":$(res 6)},
 {"uid":"$UB","name":"fit-b","namespace":"team-m",
  "containers":[{"name":"a","image":"x","resources":{"limits":{"nvshare.com/gpu-memory":"4"}}},
                {"name":"b","image":"x","resources":{"limits":{"nvshare.com/gpu-memory":2}}}],
  "initContainers":[{"name":"i","image":"x","resources":{"limits":{"nvshare.com/gpu-memory":"1"}}}]}]
EOF2
start_api token-M "$T/pods.json" || { not_ok "fake API server starts"; exit 1; }
start_kube_scheduler --reserve 0
wait_event 5 k8s_list pods=3 || not_ok "scheduler listed the pods"

# jget EXPR: EXPR evaluated on the status JSON (d), with cl(NAME) = the
# client called NAME (or with that pid) and gpu(UUID) = that GPU.
jget() {
  "$CTL" --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
cl = lambda n: [c for c in d["clients"] if n in (c["claimed_name"], str(c["pid"]))][0]
gpu = lambda u: [g for g in d["gpus"] if g["uuid"] == u][0]
print(eval(sys.argv[1]))' "$1" 2>/dev/null
}
jis() { [ "$(jget "$1")" = "$2" ]; }

# mem_client NAME FIFO [env...]: quota_app --mem in Pod $UP, commands from
# FIFO (fd opened by the caller); output in $T/NAME.out / .err.
mem_client() {
  local name=$1 fifo=$2; shift 2
  mkfifo "$fifo"
  # Not through bg(): a redirection of a function call opens the FIFO in
  # this shell, which would block until a writer comes.
  sh -c 'd=$1/$$; mkdir -p "$d"; printf "%s\n" "$2" >"$d/cgroup"; shift 2; exec env "$@"' \
    sh "$PROC" "$(cg_systemd_v2 "$UP")" LD_PRELOAD="$PRELOAD" "$@" "$QAPP" --name "$name" --mem \
    <"$fifo" >"$T/$name.out" 2>"$T/$name.err" &
  _pids+=($!)
}
# cmd FD NAME LINE: sends LINE, prints the answer.
cmd() {
  local n
  n=$(grep -cE '^(ALLOC|FREE|INFO|NVML)' "$T/$2.out")
  echo "$3" >&"$1"
  wait_for 5 test "$(grep -cE '^(ALLOC|FREE|INFO|NVML)' "$T/$2.out")" -gt "$n"
  grep -E '^(ALLOC|FREE|INFO|NVML)' "$T/$2.out" | tail -1
}
has() { case $1 in *"$2"*) return 0;; esac; return 1; }

# 1. The device plugin's environment (2 GiB in bytes) as Allocate sets it.
mem_client M "$T/m.in" NVSHARE_GPU_MEMORY_REQUEST=$((2 * GI)) NVSHARE_GPU_MEMORY_TOTAL=$((16 * GI))
PID_M=${_pids[-1]}
exec 7>"$T/m.in"
check "the scheduler sets the Pod's request as the limit (SET_LIMITS 2Gi)" \
  wait_log 5 "$T/M.err" 'GPU 0: memory limit 2Gi by the scheduler'
check "nvsharectl --json: pod.mem_request = 2 units x 1Gi" jis "cl('$PID_M')['pod']['mem_request']" $((2 * GI))
check "nvsharectl --json: effective mem_limit 2 GiB" jis "cl('$PID_M')['gpus'][0]['limits']['mem_limit']" $((2 * GI))
r=$(cmd 7 M info)
check "cuMemGetInfo total = 2 GiB ($r)" has "$r" "total=$((2 * GI))"
r=$(cmd 7 M nvml)
check "NVML total = 2 GiB ($r)" has "$r" "rc=0 total=$((2 * GI)) used=0 free=$((2 * GI))"
r=$(cmd 7 M "alloc 2048")
check "2 GiB allocate ($r)" has "$r" "ALLOC ok"
r=$(cmd 7 M "alloc 64")
check "64 MiB more is refused at 2 GiB ($r)" has "$r" "ALLOC fail"
check "the refusal names the Pod's request" grep -q "nvshare.com/gpu-memory (NVSHARE_GPU_MEMORY_REQUEST)" "$T/M.err"
r=$(cmd 7 M free)

# 2. A process that forges its environment does not get more.
mem_client F "$T/f.in" NVSHARE_GPU_MEMORY_REQUEST=$((8 * GI))
exec 8>"$T/f.in"
check "forged NVSHARE_GPU_MEMORY_REQUEST=8Gi: the scheduler lowers it to the Pod's 2Gi" \
  wait_log 5 "$T/F.err" 'GPU 0: memory limit 2Gi by the scheduler'
r=$(cmd 8 F info)
check "forged: cuMemGetInfo total = 2 GiB ($r)" has "$r" "total=$((2 * GI))"
echo quit >&8

# 3. The annotation overrides the request (up), live.
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/gpu-memory-limit\":\"4Gi\"}}"
check "annotation 4Gi reaches the process" wait_log 3 "$T/M.err" 'GPU 0: memory limit 4Gi'
r=$(cmd 7 M info)
check "annotation: cuMemGetInfo total = 4 GiB ($r)" has "$r" "total=$((4 * GI))"
r=$(cmd 7 M nvml)
check "annotation: NVML total = 4 GiB ($r)" has "$r" "rc=0 total=$((4 * GI))"
r=$(cmd 7 M "alloc 3072")
check "annotation: 3 GiB allocate ($r)" has "$r" "ALLOC ok"
r=$(cmd 7 M free)
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{}}"
check "annotation removed: back to the request (2Gi)" \
  wait_for 3 sh -c '[ "$(grep "GPU 0: memory limit" "$1" | tail -1 | grep -c "limit 2Gi")" = 1 ]' sh "$T/M.err"
r=$(cmd 7 M info)
check "cuMemGetInfo total = 2 GiB again ($r)" has "$r" "total=$((2 * GI))"
# nvsharectl overrides both, in the existing precedence (ctl > annotation >
# request): the administrator's 3 GiB for this process.
"$CTL" --set-client "$PID_M" --memory-limit 3Gi >/dev/null
check "nvsharectl --set-client 3Gi overrides the request" \
  wait_for 3 sh -c '[ "$(grep "GPU 0: memory limit" "$1" | tail -1 | grep -c "limit 3Gi")" = 1 ]' sh "$T/M.err"
r=$(cmd 7 M info)
check "nvsharectl: cuMemGetInfo total = 3 GiB ($r)" has "$r" "total=$((3 * GI))"
echo quit >&7

# 4. Fit: a 10 GiB GPU; Pods of 6 and 4+2 units (the init container's 1
# is inside the sum) allocate 1 GiB each.
common=(--gpu-uuid GPU-fit --total 10Gi --alloc 1Gi)
fcpod A "$(cg_systemd_v2 "$UA")" "${common[@]}" --script 'wait mode1 10s;wait mode0 10s;stay'
nmode0() { grep -c 'GPU_MODE gpu=0 value=0' "$T/A.out"; }
check "Pod fit-a (6 units) alone: concurrent" wait_for 3 test "$(nmode0)" -ge 1
check "status: expected 6 GiB of 10, 1 GiB allocated" \
  jis '[gpu("GPU-fit")[k] for k in ("serialized", "allocated", "expected")]' "[False, $GI, $((6 * GI))]"
fcpod B "$(cg_systemd_v2 "$UB")" "${common[@]}" --script stay
check "Pod fit-b (4+2 units) joins: 12 GiB expected > 10 GiB serializes the GPU" \
  wait_ev 3 A 'GPU_MODE gpu=0 value=1'
check "status: serialized with 2 GiB allocated, 12 GiB expected" \
  jis '[gpu("GPU-fit")[k] for k in ("serialized", "allocated", "expected")]' "[True, $((2 * GI)), $((12 * GI))]"
check "fit-b's request is the sum of its containers (6 GiB)" jis 'cl("B")["pod"]["mem_request"]' $((6 * GI))
api_cmd "{\"op\":\"delete\",\"uid\":\"$UB\"}"
check "Pod fit-b deleted: its request no longer counts, concurrent again" \
  wait_for 3 sh -c '[ "$(grep -c "GPU_MODE gpu=0 value=0" "$1")" -ge 2 ]' sh "$T/A.out"
check "status: expected 7 GiB" jis 'gpu("GPU-fit")["expected"]' $((7 * GI))
echo "1..$_tap_n"
