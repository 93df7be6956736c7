#!/usr/bin/env bash
# The decision core (scheduler/core/) stays a library with a port
# (docs/architecture.md "The decision core"): it includes only its own
# headers, common/'s and the C library's, and reads no clock (the shell
# hands it `now`). make lint runs this; it prints each violation.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
for f in scheduler/core/*.[ch]; do
	while IFS= read -r inc; do
		h=${inc#*\"}
		h=${h%\"*}
		if [[ -f scheduler/core/$h || -f common/$h ]] && [[ $h != */* ]]; then
			continue
		fi
		echo "$f: includes \"$h\": the core includes only scheduler/core/ and common/ headers" >&2
		bad=1
	done < <(grep -E '^#include "' "$f" || true)
	if grep -nE '\b(nvs_now_ns|clock_gettime|gettimeofday|time)\(' "$f" >&2; then
		echo "$f: reads a clock: the core takes \`now\` from the shell" >&2
		bad=1
	fi
done
# A header named like one of the C library's is found first by every
# #include <...> of a build that puts its folder on the path (the fuzz
# build: -Ischeduler -Ischeduler/core): scheduler/limits.h and then
# core/limits.h hid <limits.h> (PATH_MAX undeclared) twice.
for f in common/*.h scheduler/*.h scheduler/core/*.h scheduler/k8s/*.h client/*.h; do
	b=${f##*/}
	if [ -f "/usr/include/$b" ] || [ -f "/usr/include/x86_64-linux-gnu/$b" ]; then
		echo "$f: named like the C library's <$b>, which it hides where its folder is on the include path" >&2
		bad=1
	fi
done
exit $bad
