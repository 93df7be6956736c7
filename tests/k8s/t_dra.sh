#!/usr/bin/env bash
# nvshare-dra-plugin (docs/dra.md) against a fake kubelet (plugin watcher,
# DRA manager and health stream: tests/k8s/fake_kubelet.py) and the fake
# API server (claims served, ResourceSlices taken and checked:
# tests/k8s_watch/fake_apiserver.py), beside a real nvshare-scheduler and
# real clients (sim_app under libnvshare.so) on the simulated GPU with
# three GPUs: the slice published and updated when GPUs change; two claims
# on one GPU prepared, each process getting its claim's memory and cores
# from the scheduler (annotations lower, never raise; nvsharectl capped);
# claims over a GPU's remaining capacity, malformed claims and API errors
# refused with clear errors; Unprepare removing the limits; a killed
# plugin recovering its claims from the checkpoint; kubelet restarts.
# The scenarios are in dra_tests.py. Needs python3-grpcio, python3-protobuf,
# protoc and openssl.
# shellcheck disable=SC1091,SC2154 # libs by path; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
for f in nvshare-dra-plugin tests/e2e/sim_app libnvshare.so; do
  [ -e "$B/$f" ] || { not_ok "$B/$f not built"; exit 1; }
done
if ! "$PY" -c 'import grpc, google.protobuf' 2>/dev/null || ! command -v protoc >/dev/null; then
  not_ok "python3-grpcio, python3-protobuf and protoc are needed (apt-get install python3-grpcio python3-protobuf protobuf-compiler)"
  exit 1
fi
# Three simulated GPUs of 16Gi, fixed by the first process that opens the
# state (the plugin's NVML, the clients' driver).
export NVSHARE_SIM_GPUS=3 NVSHARE_SIM_MEM=16Gi
UA=0a1b2c3d-0000-4000-8000-0000000000a1
UB=0a1b2c3d-0000-4000-8000-0000000000b1
UC=0a1b2c3d-0000-4000-8000-0000000000c1
UD=0a1b2c3d-0000-4000-8000-0000000000d1
mkcerts || { not_ok "openssl makes a CA and a server certificate"; exit 1; }
printf 'token-D\n' >"$T/token"
cat >"$T/pods.json" <<EOF_PODS
[{"uid":"$UA","name":"trainer-a","namespace":"team-a"},
 {"uid":"$UB","name":"trainer-b","namespace":"team-b",
  "annotations":{"nvshare.com/gpu-core-limit":"80"}},
 {"uid":"$UC","name":"notebook-c","namespace":"team-c",
  "annotations":{"nvshare.com/gpu-core-limit":"10"}},
 {"uid":"$UD","name":"notebook-d","namespace":"team-c"}]
EOF_PODS
start_api token-D "$T/pods.json" || { not_ok "fake API server starts"; exit 1; }
start_kube_scheduler || { not_ok "scheduler starts"; exit 1; }
wait_event 5 k8s_list pods=4 || not_ok "scheduler listed the pods"
NVS_SPEED=$(speed_factor)
export T PRELOAD API_URL NODE CTL PROC UA UB UC UD NVS_SPEED PYTHONDONTWRITEBYTECODE=1
export API_CTL=$T/api.ctl API_OUT=$T/api.out SLICES=$T/slices.json
"$PY" "$NVS_ROOT/tests/k8s/dra_tests.py"
rc=$?
if [ $rc -ne 0 ]; then
  for f in "$T"/p*.log "$T/scheduler.log"; do [ -f "$f" ] && { diag "== $f"; tail -n 25 "$f" | sed 's/^/# /'; }; done
fi
exit $rc
