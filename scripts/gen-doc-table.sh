#!/usr/bin/env bash
# A table in a document generated from the source table it describes: the
# lines between two marker lines in DOC are what COMMAND prints.
#
#   scripts/gen-doc-table.sh DOC NAME SOURCE COMMAND [ARG...]          rewrite it
#   scripts/gen-doc-table.sh --check DOC NAME SOURCE COMMAND [ARG...]  fail when stale
#
# The markers, alone on their lines:
#   <!-- NAME:begin (generated from SOURCE by make gen: do not edit) -->
#   <!-- NAME:end -->
# COMMAND runs in a clean environment (env -i): the table is the defaults,
# whatever this shell sets. make gen and make check-gen (CI) run it for
# docs/scheduler.md (scheduler/settings.def, nvshare-scheduler
# --help-table=md), docs/kubernetes.md (scheduler/k8s/annotations.def) and
# docs/metrics.md (scheduler/metrics.def; both printed by table_doc).
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
[ $# -ge 4 ] || { echo "usage: $0 [--check] DOC NAME SOURCE COMMAND [ARG...]" >&2; exit 2; }
doc=$1 name=$2 src=$3
shift 3
begin="<!-- $name:begin (generated from $src by make gen: do not edit) -->"
end="<!-- $name:end -->"
grep -qxF -- "$begin" "$doc" && grep -qxF -- "$end" "$doc" ||
  { echo "$doc: the $name marker lines are missing" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
env -i "$@" >"$tmp/table"
awk -v b="$begin" -v e="$end" -v t="$tmp/table" '
  $0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
  $0 == e { skip = 0 }
  !skip' "$doc" >"$tmp/doc"
if [ "$check" = 1 ]; then
  cmp -s "$tmp/doc" "$doc" || { echo "$doc: the $name is stale: run make gen" >&2; exit 1; }
  echo "$doc: the $name is up to date"
else
  cat "$tmp/doc" >"$doc"
fi
