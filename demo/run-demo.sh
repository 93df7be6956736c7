#!/usr/bin/env bash
# nvshare demo (`make demo`, which builds first): starts nvshare-scheduler on a
# private socket directory and runs two CUDA clients that share one GPU
# whose schedulable memory (NVSHARE_GPU_CAPACITY) holds only one of them, so
# the scheduler serializes them. The lock hand-offs (GPU_MODE, LOCK_OK,
# DROP_LOCK, LOCK_RELEASED) and the clients' progress are printed as they
# happen, then a summary. Job B goes idle for a while half-way: nvshare's idle
# release hands the GPU to A within milliseconds instead of at the end of the
# time quantum.
#
# Real GPU: used when nvidia-smi works and PyTorch sees CUDA (two small
# PyTorch jobs). Otherwise the simulated GPU of the test suite (tests/sim)
# and the test application sim_app. NVSHARE_DEMO_SIM=1 forces the simulator.
#
# Exit status 0 iff both clients finished correctly. Everything it started is
# stopped and its temporary directory removed on exit (also on Ctrl-C).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
NVS_BUILD=${NVS_BUILD:-build}
case "$NVS_BUILD" in /*) B=$NVS_BUILD;; *) B=$ROOT/$NVS_BUILD;; esac

die() { echo "demo: $*" >&2; exit 1; }
for f in "$B/libnvshare.so" "$B/nvshare-scheduler"; do
  [ -e "$f" ] || die "$f not found: build first (make demo does)"
done

T=$(mktemp -d "${TMPDIR:-/tmp}/nvshare-demo.XXXXXX")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  sleep 0.2
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM

export NVSHARE_SOCK_DIR=$T/sock
PRELOAD=$B/libnvshare.so
if [ -f "$B/.san" ]; then
  PRELOAD="$(${CC:-gcc} -print-file-name=libasan.so):$PRELOAD"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
fi

REAL=0
if [ -z "${NVSHARE_DEMO_SIM:-}" ] && command -v nvidia-smi >/dev/null 2>&1 &&
   nvidia-smi -L >/dev/null 2>&1 &&
   python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  REAL=1
fi

if [ $REAL = 1 ]; then
  GPU_DESC="$(nvidia-smi -L | head -1)"
  CAPACITY=1Gi
  TQ=2
  cat >"$T/job.py" <<'PY'
# Small PyTorch job: holds MIB MiB on the GPU and runs STEPS matmul steps,
# printing progress lines in the same format as sim_app.
import sys, time, torch
name, mib, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
idle_after = int(sys.argv[4]) if len(sys.argv) > 4 else 0
mono = lambda: time.clock_gettime(time.CLOCK_MONOTONIC) * 1e3
t0 = mono()
print(f"START name={name} t={t0:.3f}", flush=True)
dev = torch.device("cuda")
ballast = torch.ones(mib * 2**20 // 4, device=dev)
a = torch.randn(2048, 2048, device=dev)
b = torch.randn(2048, 2048, device=dev)
for i in range(1, steps + 1):
    for _ in range(8):
        c = a @ b
    torch.cuda.synchronize()
    print(f"PROGRESS name={name} kernel={i}/{steps} t={mono():.3f}", flush=True)
    if idle_after and i == idle_after:
        f = mono(); time.sleep(1.5)
        print(f"IDLE name={name} from={f:.3f} to={mono():.3f}", flush=True)
ok = bool(torch.all(ballast == 1).item())
print(f"DONE name={name} kernels={steps} elapsed_ms={mono() - t0:.1f} "
      f"result={'ok' if ok else 'BAD'} t={mono():.3f}", flush=True)
sys.exit(0 if ok else 1)
PY
  run_job() { # name idle_after
    (export LD_PRELOAD="$PRELOAD"; exec -a "job-$1" python3 "$T/job.py" "$1" 640 300 "$2")
  }
  STEP=30
else
  APP=$B/tests/e2e/sim_app
  [ -x "$APP" ] && [ -e "$B/tests/sim/libcuda.so.1" ] ||
    die "$APP or $B/tests/sim/libcuda.so.1 missing: build first (make demo does)"
  GPU_DESC="simulated GPU (tests/sim: fake libcuda.so.1, kernels take real time)"
  export LD_LIBRARY_PATH=$B/tests/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export NVSHARE_SIM_STATE_DIR=$T/simgpu
  mkdir -p "$NVSHARE_SIM_STATE_DIR"
  CAPACITY=100Mi
  TQ=1
  ln -s "$APP" "$T/job-A"
  ln -s "$APP" "$T/job-B"
  run_job() { # name idle_after
    local idle=()
    [ "$2" -gt 0 ] && idle=(--idle-after "$2" --idle-ms 1500)
    LD_PRELOAD="$PRELOAD" "$T/job-$1" --name "$1" --alloc 64Mi --kernels 600 \
      --kernel-us 5000 --report progress "${idle[@]}"
  }
  STEP=100
fi

echo "nvshare demo on: $GPU_DESC"
echo "scheduler: mode auto, capacity $CAPACITY, time quantum ${TQ}s; two jobs of 640/64 MiB each"
echo "(they do not fit together, so the GPU is serialized: one holder at a time)"
echo

NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=$CAPACITY NVSHARE_TQ=$TQ \
  "$B/nvshare-scheduler" >"$T/scheduler.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && break; sleep 0.05; done
[ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] || { cat "$T/scheduler.log"; die "scheduler did not start"; }

# Live view of the scheduler's lock decisions, with client ids named.
tail -n +1 -F "$T/scheduler.log" 2>/dev/null | awk '
  function v(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
  /HELLO client=/ { n = v("name"); gsub(/"/, "", n); name[v("client")] = n; next }
  / GPU_MODE / { printf "%s  GPU_MODE       GPU %s %s (allocated %s, capacity %s)\n", $2,
                   v("gpu"), v("serialized") == 1 ? "serialized" : "concurrent", v("allocated"), v("capacity"); fflush(); next }
  / LOCK_OK / { printf "%s  LOCK_OK        -> %-6s waited %s ms\n", $2, name[v("client")], v("waited_ms"); fflush(); next }
  / DROP_LOCK / && /reason=/ { printf "%s  DROP_LOCK      -> %-6s held %s ms (%s)\n", $2, name[v("client")], v("held_ms"), v("reason"); fflush(); next }
  / LOCK_RELEASED / { why = v("reason"); if (why == "") why = v("idle") == 1 ? "idle release" : "asked, drain " v("drain_ms") " ms"
                      held = v("held_ms"); printf "%s  LOCK_RELEASED  <- %-6s %s%s\n", $2, name[v("client")],
                      held == "" ? "" : "held " held " ms, ", why; fflush(); next }
' &
PIDS+=($!)

start_job() { # name idle_after
  run_job "$1" "$2" >"$T/$1.out" 2>"$T/$1.err" &
  JOB_PID=$!
  PIDS+=($JOB_PID)
  tail -n +1 -F "$T/$1.out" 2>/dev/null | awk -v step=$STEP '
    function v(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
    $1 == "PROGRESS" { split(v("kernel"), a, "/"); if (a[1] % step == 0) { printf "              %-6s progress %s\n", "job-" v("name"), v("kernel"); fflush() } }
    $1 == "IDLE" { printf "              %-6s was idle %.0f ms (CPU work, no kernels)\n", "job-" v("name"), v("to") - v("from"); fflush() }
    $1 == "DONE" { printf "              %-6s done: %s kernels in %.1f s, result %s\n", "job-" v("name"), v("kernels"), v("elapsed_ms") / 1000, v("result"); fflush() }' &
  PIDS+=($!)
}

T0=$(date +%s%N)
start_job A 0
PID_A=$JOB_PID
sleep 0.2
start_job B $([ $REAL = 1 ] && echo 100 || echo 200)
PID_B=$JOB_PID

# Watchdog: the demo must not hang.
LIMIT=${NVSHARE_DEMO_TIMEOUT:-120}
( sleep "$LIMIT"; echo "demo: jobs still running after ${LIMIT}s, stopping them"; kill -TERM $PID_A $PID_B 2>/dev/null ) &
WD=$!
PIDS+=($WD)
wait $PID_A; RC_A=$?
wait $PID_B; RC_B=$?
kill $WD 2>/dev/null
T1=$(date +%s%N)
sleep 0.3 # let the live view catch up

echo
echo "Summary ($(awk -v a=$T0 -v b=$T1 'BEGIN { printf "%.1f", (b - a) / 1e9 }') s in total):"
awk '
  function v(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
  /HELLO client=/ { n = v("name"); gsub(/"/, "", n); name[v("client")] = n; order[++nc] = v("client"); next }
  / LOCK_OK / { grants[v("client")]++; total++; if (last != "" && last != v("client")) handoffs++; last = v("client"); next }
  / DROP_LOCK / && /reason=tq-expired/ { drops++; next }
  / LOCK_RELEASED / { c = v("client"); if (v("held_ms") != "") held[c] += v("held_ms"); if (v("idle") == 1) { idle[c]++; idles++ } next }
  END {
    for (i = 1; i <= nc; i++) { c = order[i]
      printf "  %-6s held the GPU %d time(s), %.0f ms in total%s\n", name[c], grants[c], held[c],
             idle[c] ? sprintf(", %d idle release(s)", idle[c]) : "" }
    printf "  hand-offs between the jobs: %d; DROP_LOCK at quantum expiry: %d; idle releases: %d\n",
           handoffs, drops, idles
  }' "$T/scheduler.log"
for j in A B; do
  grep -h "^DONE" "$T/$j.out" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(elapsed_ms|result)=/) { split($i, a, "="); r[a[1]] = a[2] }
    printf "  job-%s finished in %.1f s, result %s\n", "'$j'", r["elapsed_ms"] / 1000, r["result"] }'
done
if [ $RC_A -eq 0 ] && [ $RC_B -eq 0 ] && grep -q "result=ok" "$T/A.out" && grep -q "result=ok" "$T/B.out"; then
  echo "demo: OK"
  exit 0
fi
echo "demo: FAILED (exit status A=$RC_A B=$RC_B); last lines of the logs:"
for f in "$T/A.err" "$T/B.err" "$T/scheduler.log"; do echo "--- $(basename "$f")"; tail -n 20 "$f"; done
exit 1
