#!/usr/bin/env bash
# Checks that client/entry_points.def, the wrappers and the dynamic exports
# of libnvshare.so agree, and lists wrapped driver names the CUDA stub
# libcuda does not export (only the documented ones may be missing).
#   client/check_exports.sh build/libnvshare.so /usr/local/cuda/lib64/stubs/libcuda.so
set -euo pipefail
lib=$1 stub=${2:-}
here=$(cd "$(dirname "$0")/.." && pwd)
# Names (and families) from the table, without cuda.h: no macro can expand.
table=$(printf '#define NVS_WRAP(n,t,f) NVS_T n f\n#define NVS_WRAP_R(n,t,f) NVS_T n f\n#include "client/entry_points.def"\n' |
  ${CC:-gcc} -E -P -x c -I"$here" - | tr ';' '\n' | grep -o 'NVS_T [A-Za-z0-9_]* [A-Z_]*' | cut -d' ' -f2,3)
want=$( (echo "$table" | cut -d' ' -f1; echo dlsym) | sort -u)
have=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u)
rc=0
missing=$(comm -23 <(echo "$want") <(echo "$have"))
extra=$(comm -13 <(echo "$want") <(echo "$have"))
if [ -n "$missing" ]; then echo "check_exports: in the table but not exported by $lib:" $missing >&2; rc=1; fi
if [ -n "$extra" ]; then echo "check_exports: exported by $lib but not in the table:" $extra >&2; rc=1; fi
syms=$(nm -D "$lib")  # not piped into grep -q: SIGPIPE + pipefail
for v in GLIBC_2.2.5 GLIBC_2.34; do
  if [ "$(uname -m)" = x86_64 ] && ! grep -q " dlsym@@*$v\$" <<<"$syms"; then
    echo "check_exports: dlsym@$v not exported" >&2; rc=1
  fi
done
# Documented: the CUDA 13 driver exports no cuGetProcAddress_v2_ptsz.
allowed="cuGetProcAddress_v2_ptsz"
if [ -n "$stub" ] && [ -f "$stub" ]; then
  drv=$(echo "$table" | awk '$2 != "RT" && $2 != "NVML" {print $1}' | sort -u)
  sn=$(nm -D --defined-only "$stub" | awk '{print $3}' | sed 's/@.*//' | sort -u)
  notin=$(comm -23 <(echo "$drv") <(echo "$sn"))
  for n in $notin; do
    case " $allowed " in
      *" $n "*) echo "check_exports: note: $n not exported by $(basename "$stub") (documented)";;
      *) echo "check_exports: $n is not exported by $stub" >&2; rc=1;;
    esac
  done
fi
[ $rc = 0 ] && echo "check_exports: $(echo "$want" | wc -l) names consistent"
exit $rc
