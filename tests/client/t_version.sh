#!/usr/bin/env bash
# One version (VERSION, plus git describe from git) in every artifact: the
# four programs' --version, the library's greppable string and its DEBUG
# line, the image tag of the kustomize base; no stale hard-coded version.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$NVS_ROOT" || exit 1
want=$(tr -d ' \t\r\n' <VERSION)
# What the build compiled in (the tree may have moved on since: a commit
# changes git describe until the next make).
full=$(sed -n 's/^#define NVS_VERSION_FULL "\(.*\)"$/\1/p' "$B/gen/nvs_version.h" 2>/dev/null)
check "VERSION holds a release number ($want)" bash -c "[[ '$want' =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]"
check "the build's version is VERSION or VERSION+git describe ($full)" \
  bash -c "[ -n '$full' ] && { [ '$full' = '$want' ] || [[ '$full' == '$want+'* ]]; }"
now=$(scripts/gen-version.sh --print)
check "scripts/gen-version.sh --print: VERSION[+describe] ($now)" \
  bash -c "[ '$now' = '$want' ] || [[ '$now' == '$want+'* ]]"

# Outside a git checkout (a release tarball) the version is VERSION alone.
mkdir -p "$T/tarball/scripts"
cp VERSION "$T/tarball/" && cp scripts/gen-version.sh "$T/tarball/scripts/"
got=$(GIT_CEILING_DIRECTORIES=$T "$T/tarball/scripts/gen-version.sh" --print 2>&1)
check "outside git: VERSION alone (got '$got')" [ "$got" = "$want" ]

# Each program prints "NAME VERSION..." as its first line; all the same.
for p in nvshare-scheduler nvsharectl nvshare-device-plugin; do
  if [ ! -x "$B/$p" ]; then
    if [ "$p" = nvshare-device-plugin ]; then
      ok "$p --version # SKIP not built (needs libgrpc-dev, libprotobuf-c-dev)"
      continue
    fi
    not_ok "$p not built"; continue
  fi
  out=$("$B/$p" --version 2>&1 | head -n1); rc=$?
  v=$(echo "$out" | awk '{print $2}')
  check "$p --version: '$out' names $full" bash -c "[ $rc -eq 0 ] && [ '${out%% *}' = '$p' ] && [ '$v' = '$full' ]"
  out=$("$B/$p" -V 2>&1 | head -n1)
  check "$p -V is the same" [ "$(echo "$out" | awk '{print $2}')" = "$full" ]
done

# The library: a string strings(1) finds, and one DEBUG line.
lv=$(grep -ao 'nvshare-version [^[:space:][:cntrl:]]*' "$LIBNVSHARE" | head -n1)
check "libnvshare.so carries 'nvshare-version $full' (found '$lv')" [ "$lv" = "nvshare-version $full" ]
if command -v strings >/dev/null; then
  check "strings libnvshare.so | grep nvshare-version finds it" \
    bash -c "strings '$LIBNVSHARE' | grep -qx 'nvshare-version $full'"
fi
NVSHARE_DEBUG=1 LD_PRELOAD="$PRELOAD" "$B/tests/e2e/sim_app" --kernels 2 >/dev/null 2>"$T/debug.err"
n=$(grep -c "DEBUG libnvshare $full\$" "$T/debug.err")
check "NVSHARE_DEBUG=1: the library logs its version once ($n)" [ "$n" = 1 ]
LD_PRELOAD="$PRELOAD" "$B/tests/e2e/sim_app" --kernels 2 >/dev/null 2>"$T/quiet.err"
check "without NVSHARE_DEBUG it does not" bash -c "! grep -q 'libnvshare $full' '$T/quiet.err'"

# Images: the kustomize base names VERSION as every image's tag, and the
# image targets default to it.
tags=$(sed -n 's/^ *newTag: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' deploy/kubernetes/kustomization.yaml | sort -u)
check "deploy/kubernetes/kustomization.yaml: every newTag is $want ($(echo "$tags" | tr '\n' ' '))" \
  [ "$tags" = "$want" ]
mt=$(make -s --no-print-directory -f Makefile print-image-tag 2>/dev/null)
check "make's IMAGE_TAG defaults to VERSION ($mt)" [ "$mt" = "$want" ]

# No release number written anywhere else (this one, or the old 0.1.0):
# C sources, make fragments, deploy files other than the kustomize base.
stale=$(git ls-files '*.c' '*.h' '*.mk' 'Makefile' 'deploy/*' 2>/dev/null |
  grep -v '^deploy/kubernetes/kustomization.yaml$' |
  xargs grep -nF -e "\"$want\"" -e "$want" -e '0.1.0' 2>/dev/null)
check "no hard-coded version outside VERSION and the kustomize base" [ -z "$stale" ]
[ -z "$stale" ] || echo "$stale" | sed 's/^/# /'

# CHANGELOG.md has a dated section for the release VERSION names (the
# images and the package carry that number), below [Unreleased].
check "CHANGELOG.md: a section '## [$want] - YYYY-MM-DD' below '## [Unreleased]'" bash -c "
  u=\$(grep -n '^## \\[Unreleased\\]' CHANGELOG.md | cut -d: -f1)
  r=\$(grep -nE '^## \\[$want\\] - [0-9]{4}-[0-9]{2}-[0-9]{2}\$' CHANGELOG.md | cut -d: -f1)
  [ -n \"\$r\" ] && { [ -z \"\$u\" ] || [ \"\$u\" -lt \"\$r\" ]; }"
echo "1..$_tap_n"
