#!/usr/bin/env bash
# Interposition: every lookup path (dlsym on the driver handle and
# RTLD_DEFAULT, cuGetProcAddress v1/_v2 with flags 0/2, probes, too-new
# versions, pass-through, foreign cu* names, RTLD_NEXT from another preloaded
# library), unknown driver variants, and the export/table/stub consistency.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
TC=$B/tests/client

out=$(NVS_FOREIGN_LIB=$TC/libforeign.so LD_PRELOAD="$PRELOAD:$TC/libnextprobe.so" \
  "$TC/probe_lookup" 2>"$T/lookup.err")
rc=$?
# Renumber the probe's TAP lines into ours.
while IFS= read -r l; do
  case "$l" in
    "ok "*) ok "${l#ok [0-9]* - }";;
    "not ok "*) not_ok "${l#not ok [0-9]* - }";;
    "#"*) echo "$l";;
  esac
done <<<"$out"
check "probe_lookup exited 0" [ $rc -eq 0 ]
grep -q 'nvs_next_lookup not preloaded' <<<"$out" && not_ok "RTLD_NEXT test did not run"

# A newer driver's unknown variants: gated/accounted ones fail closed.
out=$(LD_LIBRARY_PATH=$TC/fakedrv LD_PRELOAD="$PRELOAD" "$TC/probe_unknown" 2>"$T/unknown.err")
while IFS= read -r l; do
  case "$l" in "ok "*) ok "${l#ok [0-9]* - }";; "not ok "*) not_ok "${l#not ok [0-9]* - }";; esac
done <<<"$out"
check "refusal logged once with the variant's name" grep -q 'cuMemAlloc_v9.*refused' "$T/unknown.err"

# Table, wrappers, exports and the CUDA 13 stub agree (also a make rule).
check "check_exports: table = nm -D libnvshare.so, stub has every driver name" \
  "$NVS_ROOT/client/check_exports.sh" "$LIBNVSHARE" "${CUDA_HOME:-/usr/local/cuda}/lib64/stubs/libcuda.so"
check "dlsym exported as GLIBC_2.2.5 and default GLIBC_2.34" \
  bash -c "nm -D '$LIBNVSHARE' | grep -q ' dlsym@GLIBC_2.2.5\$' && nm -D '$LIBNVSHARE' | grep -q ' dlsym@@GLIBC_2.34\$'"
check "nothing else exported (internal symbols hidden)" \
  bash -c "! nm -D --defined-only '$LIBNVSHARE' | awk '\$2 != \"A\" {print \$3}' | grep -qE '^nvs_'"
check "no libcuda / libnvidia-ml link-time dependency" \
  bash -c "! readelf -d '$LIBNVSHARE' | grep -qE 'NEEDED.*(libcuda|libnvidia-ml)'"
echo "1..$_tap_n"
