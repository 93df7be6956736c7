#!/usr/bin/env bash
# Pod sockets end to end (docs/security.md "Pod sockets", issue 31 item 1):
# nvshare-device-plugin against the fake kubelet (device-plugin API and
# PodResources List, tests/k8s/fake_kubelet.py) and a real scheduler on this
# test's private socket directory, shared with the plugin. Allocate mounts
# only the allocation's pods/<key> directory, a key of its own per Allocate;
# PreStartContainer binds it to the Pod PodResources names, and a client
# connecting there is that Pod (tenant source "socket"); the same devices
# for another Pod get a new key and the old one is never bound to it (nor to
# a Pod PodResources names without an Allocate); reconciliation writes
# missing bindings and removes stale ones (at once when the devices moved,
# after 10 lists otherwise), keeps an init container's unbound allocation
# while its devices are held, leaves another binder's alone, and survives a
# kubelet restart that lists no Pod for a while; PodResources missing
# degrades to the shared socket (cgroup identity) with one warning, and
# recovers; links follow a restarted scheduler; a plugin restarted after a
# reboot emptied the socket directory restores it from --state-dir. Scenarios
# in dp_podsock_tests.py. Needs python3-grpcio, python3-protobuf, protoc.
# shellcheck disable=SC1091,SC2154 # libs by path; lib variables
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$NVS_ROOT/tests/k8s_watch/k8s_lib.sh"
. "$NVS_ROOT/tests/security/sec_lib.sh"
for b in nvshare-device-plugin nvshare-scheduler nvsharectl tests/sched/fake_client; do
  [ -x "$B/$b" ] || { not_ok "$b not built ($B/$b)"; exit 1; }
done
if ! "$PY" -c 'import grpc, google.protobuf' 2>/dev/null || ! command -v protoc >/dev/null; then
  not_ok "python3-grpcio, python3-protobuf and protoc are needed (apt-get install python3-grpcio python3-protobuf protobuf-compiler)"
  exit 1
fi
# Pods the API server knows (its watch gives the scheduler their UIDs and
# annotation limits); the test allocates to others too.
pods_api 0a1b2c3d-0000-4000-8000-0000000000a1:team-a/trainer:5:256 \
  0a1b2c3d-0000-4000-8000-0000000000b1:team-b/next:7:384 \
  0a1b2c3d-0000-4000-8000-0000000000e1:team-e/e1:9:512 || exit 1
# How the Python side starts (and restarts) the scheduler: as
# start_kube_scheduler does, with a fake /proc where test processes have no
# cgroup file (their identity is the socket or nothing).
SCHED_ARGS="--no-nvml --proc-root $PROC --kube-api $API_URL --kube-token-file $T/token --kube-ca-file $T/ca.crt --node-name $NODE"
NVS_SPEED=$(speed_factor)
export T PROC SCHED_ARGS PYTHONDONTWRITEBYTECODE=1 NVS_SPEED
export NVSHARE_STATE_FILE=none
"$PY" "$NVS_ROOT/tests/k8s/dp_podsock_tests.py"
rc=$?
if [ $rc -ne 0 ]; then
  for f in "$T"/plugin.log "$T"/scheduler.log; do [ -f "$f" ] && { diag "== $f"; tail -n 40 "$f" | sed 's/^/# /'; }; done
fi
exit $rc
