#!/usr/bin/env bash
# `make demo` and the tests never read or write the node's saved settings
# (/var/lib/nvshare/state.json, the scheduler's default state file): a
# machine where someone once ran `nvsharectl -T 45` showed a demo without
# turn-taking (issue 34, item 3). The demo runs in a private mount
# namespace whose /var/lib/nvshare/state.json is garbage: a scheduler that
# read it would set it aside as state.json.bad. And every script that starts
# schedulers sets NVSHARE_STATE_FILE.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$NVS_ROOT" || exit 1

for f in demo/run-demo.sh tests/lib.sh tests/run bench/micro/run tests/gpu/run bench/lib/config.py; do
  check "$f sets a private NVSHARE_STATE_FILE" grep -qE 'NVSHARE_STATE_FILE[=":]+ *"?(none|\$T/)' "$f"
done

if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  ok "# SKIP the demo in a mount namespace needs root (unshare -m)"
else
  cat >"$T/ns.sh" <<'NS'
set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /var/lib
mkdir /var/lib/nvshare
printf 'not the demo'"'"'s settings\n' >/var/lib/nvshare/state.json
cp /var/lib/nvshare/state.json "$T/before"
rc=0
env -u NVSHARE_STATE_FILE NVSHARE_DEMO_SIM=1 demo/run-demo.sh >"$T/demo.log" 2>&1 || rc=$?
echo "$rc" >"$T/demo.rc"
ls -A /var/lib/nvshare >"$T/after.ls"
cmp -s /var/lib/nvshare/state.json "$T/before" && echo same >"$T/after.cmp"
NS
  export T
  unshare -m bash "$T/ns.sh"
  check "the demo passes (with garbage in the node's state file)" grep -qx 0 "$T/demo.rc"
  check "the demo left /var/lib/nvshare/state.json alone (not read, not set aside)" \
    bash -c "grep -qx same '$T/after.cmp' && [ \"\$(cat '$T/after.ls')\" = state.json ]"
  grep -q '^demo: OK' "$T/demo.log" || tail -20 "$T/demo.log" | sed 's/^/# /'
fi
echo "1..$_tap_n"
