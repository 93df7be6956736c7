#!/usr/bin/env bash
# nvs-test: long
# Short libFuzzer runs of every fuzz target over its seed corpus (CI).
# NVS_FUZZ_SECONDS per target (default 15: five runs stay under 90 s in
# all). Longer runs: see module.mk and docs/reliability.md.
. "$(dirname "$0")/../lib.sh"
secs=${NVS_FUZZ_SECONDS:-15}
cd "$NVS_ROOT" || exit 1
if ! make -s fuzz >"$T/build.log" 2>&1; then
  not_ok "fuzz targets build (clang -fsanitize=fuzzer)"; sed 's/^/# /' "$T/build.log" | tail -20
  exit 1
fi
run() { # target corpus-dir
  local work=$T/corpus-$1; mkdir -p "$work"; cp -r "tests/fuzz/corpus/$2/." "$work/"
  if build/fuzz/"$1" -max_total_time="$secs" -timeout=5 -rss_limit_mb=1024 \
       -artifact_prefix="$T/" "$work" >"$T/$1.log" 2>&1; then
    ok "$1: $(grep -Eo 'Done [0-9]+ runs' "$T/$1.log" | head -1) without a finding"
  else
    not_ok "$1 found a crash"; grep -E 'ERROR|SUMMARY|artifact' "$T/$1.log" | head -10 | sed 's/^/# /'
  fi
}
run fuzz_protocol protocol
run fuzz_parse size
run fuzz_parse cgroup
run fuzz_k8s_event k8s_event
run fuzz_conn conn
