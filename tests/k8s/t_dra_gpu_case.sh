#!/usr/bin/env bash
# tests/gpu/c10_dra.py (the real-GPU case 10 of tests/gpu/run: the DRA
# driver, two claims sharing a GPU) run with --smoke on the simulated GPU,
# so that the GPU case's own steps are known to work before a GPU run:
# the fake API server in plain HTTP, the driver, the fake kubelet, the
# over-capacity refusal, bindings with the claims' ceilings, two clients
# (sim_app) on the claims' Pod sockets with their claims' limits in the
# scheduler's status, Unprepare, SIGTERM. PyTorch's checks (memory seen,
# allocations, results, step rates) run only on the GPU.
# shellcheck disable=SC1091 # lib by path
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
for f in nvshare-dra-plugin nvsharectl tests/e2e/sim_app libnvshare.so; do
  [ -e "$B/$f" ] || { not_ok "$B/$f not built"; exit 1; }
done
if ! "$PY" -c 'import grpc, google.protobuf' 2>/dev/null || ! command -v protoc >/dev/null; then
  not_ok "python3-grpcio, python3-protobuf and protoc are needed (scripts/install-deps.sh)"
  exit 1
fi
export NVSHARE_SIM_GPUS=2 NVSHARE_SIM_MEM=16Gi
start_scheduler || { not_ok "scheduler starts"; exit 1; }
# The simulated GPU 0's UUID, as NVML reports it (the driver's source).
uuid=$("$B/nvsharectl" --json 2>/dev/null | "$PY" -c 'import json, sys
print(json.load(sys.stdin)["gpus"][0]["uuid"])' 2>/dev/null)
[ -n "$uuid" ] || uuid=GPU-5e1f0000-0000-4000-8000-000000000000
# The device nodes CDI specs name, as files (the simulated GPU has none).
mkdir -p "$T/devroot/dev"
for n in nvidiactl nvidia-uvm nvidia0 nvidia1; do : >"$T/devroot/dev/$n"; done
timeout -k 5 "$(scaled 120)" "$PY" "$NVS_ROOT/tests/gpu/c10_dra.py" --smoke --sim-app "$B/tests/e2e/sim_app" \
  --plugin "$B/nvshare-dra-plugin" --lib-dir "$B" --sock-dir "$NVSHARE_SOCK_DIR" \
  --admin-dir "$NVSHARE_ADMIN_SOCK_DIR" --ctl "$B/nvsharectl" --dir "$T/c10" \
  --uuid "$uuid" --mem-mib 16384 --dev-root "$T/devroot" --preload "$PRELOAD" --out "$T/c10.json" >"$T/c10.log" 2>&1
rc=$?
while read -r status what; do
  if [ "$status" = OK ]; then ok "c10_dra.py --smoke: $what"; else not_ok "c10_dra.py --smoke: $what"; fi
done < <("$PY" - "$T/c10.json" <<'PY'
import json, sys
try:
    checks = json.load(open(sys.argv[1]))["checks"]
except (OSError, ValueError, KeyError) as e:
    checks = [[False, "no result from c10_dra.py: %s" % e]]
for ok, what in checks:
    print(("OK " if ok else "ERR ") + what.replace("\n", " ")[:600])
PY
)
[ $rc -eq 0 ] || { not_ok "c10_dra.py --smoke exits 0 (rc $rc)"; sed 's/^/# /' "$T/c10.log" | tail -n 30; }
[ -f "$T/c10.json" ] && [ "$(grep -c '^\s*true' "$T/c10.json")" -ge 7 ] || not_ok "c10_dra.py --smoke: at least 7 checks ran"
exit 0
