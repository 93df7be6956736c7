#!/usr/bin/env bash
# Allocation conversion, limits and memory information on the simulated GPU
# (16 GiB by default), through a program linked with -lcuda (plain link).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
TC=$B/tests/client
if [ ! -x "$TC/probe_alloc" ]; then ok "# SKIP simulated GPU not built"; echo "1..$_tap_n"; exit 0; fi

# run CASE [ENV=VALUE...]: one probe case in a fresh simulated GPU.
run() {
  local c=$1; shift
  rm -rf "$NVSHARE_SIM_STATE_DIR"; mkdir -p "$NVSHARE_SIM_STATE_DIR"
  local out rc
  out=$(env "$@" LD_PRELOAD="$PRELOAD" "$TC/probe_alloc" "$c" 2>>"$T/$c.err")
  rc=$?
  while IFS= read -r l; do
    case "$l" in "ok "*) ok "$c: ${l#ok - }";; "not ok "*) not_ok "$c: ${l#not ok - }";; esac
  done <<<"$out"
  check "$c: exited 0" [ $rc -eq 0 ]
}

run convert
run default
check "default refusal says why and how to change it" \
  grep -q "GPU's memory size; set NVSHARE_ENABLE_SINGLE_OVERSUB=1" "$T/default.err"
run oversub NVSHARE_ENABLE_SINGLE_OVERSUB=1
run default NVSHARE_ENABLE_SINGLE_OVERSUB=0
run limit NVSHARE_GPU_MEMORY_LIMIT=512Mi
check "limit refusal names NVSHARE_GPU_MEMORY_LIMIT" grep -q 'is NVSHARE_GPU_MEMORY_LIMIT' "$T/limit.err"
run threads NVSHARE_GPU_MEMORY_LIMIT=1Gi
check "refusals rate-limited (a racing loop does not flood stderr)" \
  [ "$(grep -c 'refused' "$T/threads.err")" -le 5 ]
run fork NVSHARE_GPU_MEMORY_LIMIT=512Mi
run disable NVSHARE_DISABLE=1 NVSHARE_GPU_MEMORY_LIMIT=512Mi
run graph NVSHARE_GPU_MEMORY_LIMIT=512Mi NVSHARE_DEBUG=1
check "graph: over-limit node refused with the WARN line" \
  grep -q 'allocation of 400Mi refused (CUDA_ERROR_OUT_OF_MEMORY)' "$T/graph.err"
check "graph: NVSHARE_DEBUG=1 logs the count, the refusal and the release" bash -c "
  grep -q 'cuGraphAddMemAllocNode: 128Mi on GPU 0 counted as pinned (graph memory node)' '$T/graph.err' &&
  grep -q 'cuGraphAddNode: 100Mi on GPU 0 refused (over the limit)' '$T/graph.err' &&
  grep -q 'cuGraphAddMemFreeNode 0x[0-9a-f]*: 128Mi on GPU 0 released' '$T/graph.err'"
run graph_disable NVSHARE_DISABLE=1 NVSHARE_GPU_MEMORY_LIMIT=512Mi

# NVSHARE_GPU_MEMORY_LIMIT forms: bare number = MiB, Mi, Gi, G.
for f in "512:536870912" "512Mi:536870912" "4Gi:4294967296" "4G:4294967296" "1.5Gi:1610612736"; do
  v=${f%%:*} want=${f#*:}
  got=$(NVSHARE_GPU_MEMORY_LIMIT=$v LD_PRELOAD="$PRELOAD" "$TC/probe_alloc" size 2>/dev/null | sed -n 's/^total=//p')
  check "NVSHARE_GPU_MEMORY_LIMIT=$v -> $want bytes (got $got)" [ "$got" = "$want" ]
done
got=$(NVSHARE_GPU_MEMORY_LIMIT=bogus LD_PRELOAD="$PRELOAD" "$TC/probe_alloc" size 2>"$T/bogus.err" | sed -n 's/^total=//p')
check "bad NVSHARE_GPU_MEMORY_LIMIT ignored with a warning (total $got)" \
  bash -c "[ '$got' = 17179869184 ] && grep -q NVSHARE_GPU_MEMORY_LIMIT '$T/bogus.err'"
NVSHARE_DEBUG=1 NVSHARE_GPU_MEMORY_LIMIT=512Mi LD_PRELOAD="$PRELOAD" "$TC/probe_alloc" convert >/dev/null 2>"$T/debug.err"
check "NVSHARE_DEBUG=1 logs conversions" grep -q 'cuMemAlloc: 64Mi on GPU 0 -> managed' "$T/debug.err"
echo "1..$_tap_n"
