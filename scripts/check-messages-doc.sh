#!/usr/bin/env bash
# docs/protocol.md's message tables against the table they describe
# (common/messages.def, printed by MSG_TABLE = build/tests/unit/msg_table):
# every message, and no other, has its row "| type | `NAME` | payload |
# bytes |", with the same size and, in the payload, the same field types
# in order (u32, i32, u64, str; what the prose in parentheses says is not
# checked). make check-gen runs it (CI).
#
#   scripts/check-messages-doc.sh MSG_TABLE DOC
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 MSG_TABLE DOC" >&2; exit 2; }
table=$1 doc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$table" | sort -n >"$tmp/want"
# The doc's rows: the type, the name, the size, and the field types of the
# payload once parenthesized prose is removed.
awk -F'|' '
  /^## Messages/ { on = 1; next }
  /^## / && on { on = 0 }
  on && $2 ~ /^ *[0-9]+ *$/ && $3 ~ /`[A-Z_]+`/ {
    type = $2; gsub(/ /, "", type)
    name = $3; gsub(/[ `]/, "", name)
    size = $(NF - 1); gsub(/^ +| +$/, "", size)
    p = $4
    while (p ~ /\([^()]*\)/) gsub(/\([^()]*\)/, "", p)
    types = ""
    n = split(p, w, /[^a-z0-9]+/)
    for (i = 1; i <= n; i++)
      if (w[i] ~ /^(u32|i32|u64|str)$/) types = types (types == "" ? "" : " ") w[i]
    printf "%s\t%s\t%s\t%s\n", type, name, size, types
  }' "$doc" | sort -n >"$tmp/have"
if ! diff -u --label "$doc (its message rows)" --label "common/messages.def" \
  "$tmp/have" "$tmp/want" >&2; then
  echo "$doc: the message tables disagree with common/messages.def (above: - the doc, + the table)" >&2
  exit 1
fi
echo "$doc: the message tables agree with common/messages.def"
