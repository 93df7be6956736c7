#!/usr/bin/env bash
# check_glibc.sh LIB FLOOR: fails when LIB needs a glibc symbol version
# above FLOOR (e.g. 2.17), naming the symbols (objdump -T). The library is
# preloaded into every process of a workload image: one version the
# image's glibc lacks stops every program at exec (common/glibc_floor.h).
set -euo pipefail
lib=$1 floor=$2
command -v objdump >/dev/null || { echo "check_glibc: objdump not found (binutils)" >&2; exit 1; }
# Undefined (required) symbols only: "*UND*" lines; the version is in
# parentheses. The library's own GLIBC_2.34 node (its exported dlsym) is
# a definition, which no glibc checks.
need=$(objdump -T "$lib" | awk '/\*UND\*/ && match($0, /\(GLIBC_[0-9.]+\)/) {
  v = substr($0, RSTART + 7, RLENGTH - 8); print v, $NF }')
high=$(printf '%s\n' "$need" | awk '{print $1}' | sort -V | tail -1)
over=$(printf '%s\n' "$need" | while read -r v s; do
  [ "$(printf '%s\n%s\n' "$v" "$floor" | sort -V | tail -1)" = "$floor" ] || echo "  $s@GLIBC_$v"
done)
if [ -n "$over" ]; then
  echo "check_glibc: $lib needs glibc above the floor $floor (pin these in common/glibc_floor.h):" >&2
  echo "$over" >&2
  exit 1
fi
echo "check_glibc: $(basename "$lib") needs GLIBC_$high at most (floor $floor)"
