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
# NVSHARE_DEMO_LIBRARY and NVSHARE_DEMO_SCHEDULER run it with installed
# files instead of the build's (e.g. /usr/lib/libnvshare.so and
# /usr/sbin/nvshare-scheduler from the Debian package; the simulated GPU
# still comes from the build).
#
# Exit status 0 iff both clients finished correctly. Everything it started is
# stopped and its temporary directory removed on exit (also on Ctrl-C).
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
NVS_BUILD=${NVS_BUILD:-build}
case "$NVS_BUILD" in /*) B=$NVS_BUILD;; *) B=$ROOT/$NVS_BUILD;; esac

die() { echo "demo: $*" >&2; exit 1; }
LIB=${NVSHARE_DEMO_LIBRARY:-$B/libnvshare.so}
SCHED=${NVSHARE_DEMO_SCHEDULER:-$B/nvshare-scheduler}
for f in "$LIB" "$SCHED"; do
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

# A private state file: the node's saved settings (/var/lib/nvshare/state.json,
# e.g. a time quantum someone set with nvsharectl -T) must not change the demo.
export NVSHARE_SOCK_DIR=$T/sock NVSHARE_ADMIN_SOCK_DIR=$T/admin NVSHARE_STATE_FILE=$T/state.json
PRELOAD=$LIB
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
  JOB_MEM=640Mi
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
    export LD_PRELOAD="$PRELOAD" # run_job runs in a background subshell
    exec python3 "$T/job.py" "$1" 640 1000 "$2"
  }
  STEP=100
else
  APP=$B/tests/e2e/sim_app
  [ -x "$APP" ] && [ -e "$B/tests/sim/libcuda.so.1" ] ||
    die "$APP or $B/tests/sim/libcuda.so.1 missing: build first (make demo does)"
  GPU_DESC="simulated GPU (tests/sim: fake libcuda.so.1, kernels take real time)"
  export LD_LIBRARY_PATH=$B/tests/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export NVSHARE_SIM_STATE_DIR=$T/simgpu
  mkdir -p "$NVSHARE_SIM_STATE_DIR"
  CAPACITY=100Mi
  JOB_MEM=64Mi
  TQ=1
  ln -s "$APP" "$T/job-A"
  ln -s "$APP" "$T/job-B"
  run_job() { # name idle_after
    local idle=()
    [ "$2" -gt 0 ] && idle=(--idle-after "$2" --idle-ms 1500)
    LD_PRELOAD="$PRELOAD" exec "$T/job-$1" --name "$1" --alloc 64Mi --kernels 600 \
      --kernel-us 5000 --report progress "${idle[@]}"
  }
  STEP=100
fi

echo "nvshare demo on: $GPU_DESC"
echo "scheduler: mode auto, capacity $CAPACITY, time quantum ${TQ}s; two jobs of $JOB_MEM each"
echo "(they do not fit together, so the GPU is serialized: one holder at a time)"
echo

NVSHARE_SCHED_MODE=auto NVSHARE_GPU_CAPACITY=$CAPACITY NVSHARE_TQ=$TQ \
  "$SCHED" >"$T/scheduler.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do [ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] && break; sleep 0.05; done
[ -S "$NVSHARE_SOCK_DIR/scheduler.sock" ] || { cat "$T/scheduler.log"; die "scheduler did not start"; }

# kv LINE KEY: the value of KEY=value in LINE.
kv() { local re="(^| )$2=([^ ]*)"; [[ $1 =~ $re ]] && printf '%s' "${BASH_REMATCH[2]}"; }
now() { date +%H:%M:%S.%3N; }

# Live view of the scheduler's lock decisions, client ids replaced by names.
live_sched() {
  local l ts c why held p
  declare -A name
  while IFS= read -r l; do
    ts=${l#* }; ts=${ts%% *}
    c=$(kv "$l" client)
    case $l in
      *" HELLO client="*) p=$(kv "$l" pid); why=$(kv "$l" name)
        name[$c]=$(awk -v p="$p" '$1 == p { print $2 }' "$T/pids")
        [ -n "${name[$c]}" ] || name[$c]=${why//\"/} ;;
      *" GPU_MODE gpu="*)
        if [ "$(kv "$l" serialized)" = 1 ]; then why="serialized: one holder at a time"; else why="concurrent: memory fits"; fi
        printf '%s  GPU_MODE       GPU %s %s (allocated %s, capacity %s)\n' "$ts" "$(kv "$l" gpu)" \
          "$why" "$(kv "$l" allocated)" "$(kv "$l" capacity)" ;;
      *" LOCK_OK client="*)
        printf '%s  LOCK_OK        -> %-6s (waited %s ms)\n' "$ts" "${name[$c]:-client $c}" "$(kv "$l" waited_ms)" ;;
      *" DROP_LOCK client="*reason=*)
        printf '%s  DROP_LOCK      -> %-6s (held %s ms, %s)\n' "$ts" "${name[$c]:-client $c}" \
          "$(kv "$l" held_ms)" "$(kv "$l" reason)" ;;
      *" LOCK_RELEASED client="*)
        why=$(kv "$l" reason); held=$(kv "$l" held_ms)
        if [ -z "$why" ]; then
          if [ "$(kv "$l" idle)" = 1 ]; then why="idle release"; else why="drained in $(kv "$l" drain_ms) ms"; fi
        fi
        printf '%s  LOCK_RELEASED  <- %-6s (%s%s)\n' "$ts" "${name[$c]:-client $c}" \
          "${held:+held $held ms, }" "$why" ;;
    esac
  done
}

# Live view of one job's output: every STEP-th step, idle periods, the end.
live_job() { # name step
  local l k f
  while IFS= read -r l; do
    case $l in
      PROGRESS*) k=$(kv "$l" kernel)
        [ $(( ${k%/*} % $2 )) -eq 0 ] && printf '%s    job-%s  progress %s\n' "$(now)" "$1" "$k" ;;
      IDLE*) k=$(kv "$l" to); f=$(kv "$l" from); k=$(( ${k%.*} - ${f%.*} ))
        printf '%s    job-%s  was idle for %s ms (no kernels)\n' "$(now)" "$1" "$k" ;;
      DONE*) printf '%s    job-%s  done (%s), result %s\n' "$(now)" "$1" "$(kv "$l" kernels) steps" "$(kv "$l" result)" ;;
    esac
  done
}

: >"$T/pids"
tail -n +1 -F --pid=$$ "$T/scheduler.log" 2>/dev/null | live_sched &
PIDS+=("$!")

start_job() { # name idle_after
  : >"$T/$1.out"
  run_job "$1" "$2" >"$T/$1.out" 2>"$T/$1.err" &
  JOB_PID=$!
  PIDS+=("$JOB_PID")
  echo "$JOB_PID job-$1" >>"$T/pids" # the scheduler logs pids: name them
  tail -n +1 -F --pid=$$ "$T/$1.out" 2>/dev/null | live_job "$1" $STEP &
  PIDS+=("$!")
}

T0=$(date +%s%N)
start_job A 0
PID_A=$JOB_PID
sleep 0.2
start_job B "$([ $REAL = 1 ] && echo 300 || echo 200)"
PID_B=$JOB_PID

# The demo must not hang: stop the jobs after NVSHARE_DEMO_TIMEOUT seconds.
LIMIT=${NVSHARE_DEMO_TIMEOUT:-120}
END=$(( $(date +%s) + LIMIT ))
while kill -0 $PID_A 2>/dev/null || kill -0 $PID_B 2>/dev/null; do
  if [ "$(date +%s)" -ge $END ]; then
    echo "demo: jobs still running after ${LIMIT}s, stopping them"
    kill -TERM $PID_A $PID_B 2>/dev/null
    break
  fi
  sleep 0.1
done
wait $PID_A; RC_A=$?
wait $PID_B; RC_B=$?
T1=$(date +%s%N)
sleep 0.3 # let the live view catch up

echo
echo "Summary ($(awk -v a=$T0 -v b=$T1 'BEGIN { printf "%.1f", (b - a) / 1e9 }') s in total):"
awk '
  function v(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
  FNR == NR { job[$1] = $2; next }
  /HELLO client=/ { n = v("name"); gsub(/"/, "", n); if (v("pid") in job) n = job[v("pid")]
                    name[v("client")] = n; order[++nc] = v("client"); next }
  function ms(t,   a) { split(t, a, ":"); return (a[1] * 3600 + a[2] * 60 + a[3]) * 1000 }
  / LOCK_OK / { c = v("client"); grants[c]++; since[c] = ms($2); if (last != "" && last != c) handoffs++; last = c; next }
  / DROP_LOCK / && /reason=tq-expired/ { drops++; next }
  / LOCK_RELEASED / && !/ignored/ { c = v("client"); if (c in since) { held[c] += ms($2) - since[c]; delete since[c] }
                      if (v("idle") == 1) { idle[c]++; idles++ } next }
  END {
    for (i = 1; i <= nc; i++) { c = order[i]
      printf "  %-6s held the GPU %d time(s), %.0f ms in total%s\n", name[c], grants[c], held[c],
             idle[c] ? sprintf(", %d idle release(s)", idle[c]) : "" }
    printf "  hand-offs between the jobs: %d; DROP_LOCK at quantum expiry: %d; idle releases: %d\n",
           handoffs, drops, idles
  }' "$T/pids" "$T/scheduler.log"
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
