#!/usr/bin/env bash
# nvshare-device-plugin against a fake kubelet (tests/k8s/fake_kubelet.py):
# registration with dial-back, ListAndWatch, GetPreferredAllocation (spread,
# pack), Allocate (1 and 2 GPUs, >1 slice per GPU refused), GPU health from
# NVML, kubelet restart, deleted socket, SIGTERM. Needs python3-grpcio,
# python3-protobuf and protoc (Debian). Uses Debian's interpreter explicitly:
# another python3 may come first on PATH.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
if [ ! -x "$B/nvshare-device-plugin" ]; then
  not_ok "nvshare-device-plugin not built ($B/nvshare-device-plugin)"; exit 1
fi
if ! "$PY" -c 'import grpc, google.protobuf' 2>/dev/null || ! command -v protoc >/dev/null; then
  not_ok "python3-grpcio, python3-protobuf and protoc are needed (apt-get install python3-grpcio python3-protobuf protobuf-compiler)"
  exit 1
fi
# NVS_SPEED: the speed factor its hang guards are stretched by.
NVS_SPEED=$(speed_factor)
export T PYTHONDONTWRITEBYTECODE=1 NVS_SPEED
"$PY" "$NVS_ROOT/tests/k8s/dp_tests.py"
rc=$?
if [ $rc -ne 0 ]; then
  for f in "$T"/plugin*.log; do [ -f "$f" ] && { diag "== $f"; tail -n 30 "$f" | sed 's/^/# /'; }; done
fi
exit $rc
