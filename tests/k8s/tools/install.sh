#!/usr/bin/env bash
# Installs tests/k8s/tools/node_modules (npm ci, pinned by package-lock.json)
# once. Several callers may run at once (t_manifests.sh and t_components.sh
# in one parallel tier, scripts/install-deps.sh): they take turns on a lock,
# and node_modules counts as installed only once its stamp exists, written
# after npm ci succeeded. A test that looked for the directory alone ran
# the validator against a half-installed package while the other test was
# still installing it.
#
#   tests/k8s/tools/install.sh [--check]
#
# --check only reports: exit 0 if installed, 1 if not. Otherwise exit 0
# when installed (now or before), 3 when npm is missing, 1 when npm ci
# failed (its output on stderr).
set -u
cd "$(dirname "$0")" || exit 1
stamp=node_modules/.nvshare-installed
if [ "${1:-}" = --check ]; then
	[ -f "$stamp" ]
	exit
fi
exec 9>>.install.lock
flock 9
[ -f "$stamp" ] && exit 0
if ! command -v npm >/dev/null; then
	echo "install.sh: npm not installed: cannot fetch kubernetes-models" >&2
	exit 3
fi
rm -rf node_modules
npm ci --no-audit --no-fund --loglevel=error >&2 || exit 1
touch "$stamp"
