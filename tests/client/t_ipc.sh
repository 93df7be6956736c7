#!/usr/bin/env bash
# CUDA IPC on the simulated GPU (tests/client/ipc_probe.c, an
# exporter/importer pair as in NVIDIA's simpleIPC):
#  - natively the importer reads the exporter's memory (the simulator's IPC);
#  - under nvshare by default cuMemAlloc is managed memory, the export fails
#    with CUDA_ERROR_INVALID_VALUE as on a real GPU, and exactly one warning
#    names NVSHARE_UNIFIED_MEMORY=0 (though the program tries three times);
#  - with NVSHARE_UNIFIED_MEMORY=0 the allocation is device memory, still
#    limited (NVSHARE_GPU_MEMORY_LIMIT) and gated (REQ_LOCK under mode on),
#    the export works and the importer reads the data and writes back;
#  - the client announces it in HELLO (flag 0x4, docs/protocol.md).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
P=$B/tests/client/ipc_probe
if [ ! -x "$P" ]; then ok "# SKIP simulated GPU not built"; echo "1..$_tap_n"; exit 0; fi
PY=/usr/bin/python3

# pair NAME [ENV=VALUE...]: exporter and importer with that environment;
# their outputs in $T/NAME.exp / $T/NAME.imp, stderr in *.err.
pair() {
  local n=$1; shift
  rm -f "$T/$n.h" "$T/$n.done"
  env "$@" "$P" export "$T/$n.h" "$T/$n.done" >"$T/$n.exp" 2>"$T/$n.exp.err" &
  local e=$!
  env "$@" "$P" import "$T/$n.h" "$T/$n.done" >"$T/$n.imp" 2>"$T/$n.imp.err"
  wait "$e"
}
has() { grep -qx "$2" "$T/$1"; }

pair native
check "native: export succeeds, not managed" bash -c "grep -qx export=0 '$T/native.exp' && grep -qx managed=0 '$T/native.exp'"
check "native: the importer opens the handle and reads the exporter's data" \
  bash -c "grep -qx import=0 '$T/native.imp' && grep -qx data=ok '$T/native.imp' && grep -qx close=0 '$T/native.imp'"
check "native: the exporter sees the importer's write (shared memory)" has native.exp peer_write=1
check "native: the simulator removes the handle's file when the exporter frees" \
  bash -c "! compgen -G '$NVSHARE_SIM_STATE_DIR/ipc-*' >/dev/null"

# Default: managed memory, the export fails, one hint.
rm -f "$T/def.h"
LD_PRELOAD="$PRELOAD" "$P" export "$T/def.h" "$T/def.done" >"$T/def.exp" 2>"$T/def.err"
check "nvshare default: the allocation is managed" has def.exp managed=1
check "nvshare default: cuMemAllocPitch and cuMemAllocAsync memory managed too" \
  bash -c "grep -qx pitch_managed=1 '$T/def.exp' && grep -qx async_managed=1 '$T/def.exp'"
check "nvshare default: cuIpcGetMemHandle fails with CUDA_ERROR_INVALID_VALUE (1), as the driver says" \
  has def.exp export=1
n=$(grep -c 'cuIpcGetMemHandle.*NVSHARE_UNIFIED_MEMORY=0' "$T/def.err")
check "nvshare default: exactly one warning naming NVSHARE_UNIFIED_MEMORY=0 for 3 failed exports ($n)" [ "$n" = 1 ]
check "nvshare default: no handle was written" [ ! -e "$T/def.h" ]

# The opt-out, with a memory limit: device memory, limited, exportable.
pair optout LD_PRELOAD="$PRELOAD" NVSHARE_UNIFIED_MEMORY=0 NVSHARE_GPU_MEMORY_LIMIT=8Mi NVSHARE_DEBUG=1
check "NVSHARE_UNIFIED_MEMORY=0: the allocation is device memory" has optout.exp managed=0
check "NVSHARE_UNIFIED_MEMORY=0: cuMemAllocPitch and cuMemAllocAsync memory too" \
  bash -c "grep -qx pitch_managed=0 '$T/optout.exp' && grep -qx async_managed=0 '$T/optout.exp'"
check "NVSHARE_UNIFIED_MEMORY=0: pitch and async memory counted as pinned (DEBUG)" \
  bash -c "grep -q 'cuMemAllocPitch: .* -> device memory' '$T/optout.exp.err' &&
    grep -q 'cuMemAllocAsync with NVSHARE_UNIFIED_MEMORY=0: passed through, 1048576 bytes counted as pinned' '$T/optout.exp.err'"
check "NVSHARE_UNIFIED_MEMORY=0: still limited (8 MiB more over an 8Mi limit: CUDA_ERROR_OUT_OF_MEMORY)" \
  has optout.exp over_limit=2
check "NVSHARE_UNIFIED_MEMORY=0: counted as pinned device memory (DEBUG)" \
  grep -q 'cuMemAlloc: 4Mi on GPU 0 -> device memory .* counted as pinned' "$T/optout.exp.err"
check "NVSHARE_UNIFIED_MEMORY=0: export succeeds" has optout.exp export=0
check "NVSHARE_UNIFIED_MEMORY=0: the importer reads the exporter's data" \
  bash -c "grep -qx import=0 '$T/optout.imp' && grep -qx data=ok '$T/optout.imp'"
check "NVSHARE_UNIFIED_MEMORY=0: the exporter sees the importer's write; free succeeds" \
  bash -c "grep -qx peer_write=1 '$T/optout.exp' && grep -qx free=0 '$T/optout.exp'"
check "NVSHARE_UNIFIED_MEMORY=0: no IPC hint" bash -c "! grep -q 'cuIpcGetMemHandle(' '$T/optout.exp.err'"

# Gated: under mode on, the exporter's copies ask the scheduler for the GPU.
start_scheduler --mode on
pair gated LD_PRELOAD="$PRELOAD" NVSHARE_UNIFIED_MEMORY=0
epid=$(event_field pid hello name='"ipc_probe"' | head -n1)
check "NVSHARE_UNIFIED_MEMORY=0 under a scheduler: the pair still works" \
  bash -c "grep -qx data=ok '$T/gated.imp' && grep -qx peer_write=1 '$T/gated.exp'"
check "NVSHARE_UNIFIED_MEMORY=0: still gated (REQ_LOCK from the probe)" \
  bash -c "[ -n '$epid' ] && grep -qE '\"event\":\"req_lock\".*\"pid\":($(event_field pid hello name='"ipc_probe"' | paste -sd'|'))[,}]' '$NVSHARE_EVENTS'"
kill "$SCHED_PID" 2>/dev/null; wait "$SCHED_PID" 2>/dev/null

# HELLO flags: a listener that records the first HELLO's flags.
hello_flags() {
  local sock=$T/hello/scheduler.sock
  rm -rf "$T/hello"; mkdir -p "$T/hello"
  "$PY" - "$sock" "$T/hello/flags" <<'PY' &
import socket, struct, sys
import os
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
# Listening before the path appears (as the scheduler does): a client that
# finds the path can connect, never ECONNREFUSED.
s.bind(sys.argv[1] + ".new"); s.listen(1); os.rename(sys.argv[1] + ".new", sys.argv[1])
s.settimeout(30)
c, _ = s.accept(); c.settimeout(30)
buf = b""
while len(buf) < 16:
    buf += c.recv(16 - len(buf))
magic, ver, mtype, n, seq = struct.unpack("<IHHII", buf)
p = b""
while len(p) < n:
    p += c.recv(n - len(p))
open(sys.argv[2], "w").write("%d %d\n" % (mtype, struct.unpack_from("<I", p, 4)[0]))
PY
  local l=$!
  wait_for 5 test -S "$sock"
  # The app runs until the listener has its HELLO (a 1-kernel app could
  # exit before its client thread sent it on a busy machine).
  env "$@" NVSHARE_SOCK_DIR="$T/hello" LD_PRELOAD="$PRELOAD" "$B/tests/e2e/sim_app" \
    --kernels 100000 --kernel-us 1000 >/dev/null 2>&1 &
  local a=$!
  wait "$l"
  kill "$a" 2>/dev/null
  wait "$a" 2>/dev/null
  cat "$T/hello/flags" 2>/dev/null
}
f=$(hello_flags NVSHARE_UNIFIED_MEMORY=0)
check "NVSHARE_UNIFIED_MEMORY=0: HELLO carries flag 0x4 (type, flags: $f)" \
  bash -c "set -- $f; [ \"\$1\" = 1 ] && [ \$((\$2 & 4)) = 4 ]"
f=$(hello_flags)
check "default: HELLO without flag 0x4 (type, flags: $f)" \
  bash -c "set -- $f; [ \"\$1\" = 1 ] && [ \$((\$2 & 4)) = 0 ]"
echo "1..$_tap_n"
