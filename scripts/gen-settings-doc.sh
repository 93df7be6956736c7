#!/usr/bin/env bash
# The settings table of docs/scheduler.md is generated from the scheduler's
# own table (scheduler/settings.def) by `nvshare-scheduler --help-table=md`:
#
#   scripts/gen-settings-doc.sh SCHEDULER DOC          rewrite the table in DOC
#   scripts/gen-settings-doc.sh --check SCHEDULER DOC  fail when it is stale
#
# The table sits between two marker lines in DOC (make gen, make check-gen).
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
[ $# = 2 ] || { echo "usage: $0 [--check] SCHEDULER DOC" >&2; exit 2; }
sched=$1 doc=$2
begin='<!-- settings-table:begin (generated from scheduler/settings.def by make gen: do not edit) -->'
end='<!-- settings-table:end -->'
grep -qxF -- "$begin" "$doc" && grep -qxF -- "$end" "$doc" ||
  { echo "$doc: the settings-table marker lines are missing" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A clean environment: the table is the defaults, whatever this shell sets.
env -i "$sched" --help-table=md >"$tmp/table"
awk -v b="$begin" -v e="$end" -v t="$tmp/table" '
  $0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
  $0 == e { skip = 0 }
  !skip' "$doc" >"$tmp/doc"
if [ "$check" = 1 ]; then
  cmp -s "$tmp/doc" "$doc" || { echo "$doc: the settings table is stale: run make gen" >&2; exit 1; }
  echo "$doc: the settings table is up to date"
else
  cat "$tmp/doc" >"$doc"
fi
