#!/usr/bin/env bash
# Soak: runs the fast test tier N times in a row beside two CPU-burning
# processes, and stops at the first failure. A test that fails only on a
# busy machine is a defect (docs/testing.md); this is how we look for them.
#
#   scripts/soak-tests.sh [-n 20] [--san] [-j N] [--burners 2] [--tier T] [words...]
#
# --san runs the ASan+UBSan build (build-san/, made here if missing);
# --tier soaks another tier (tests/run --tier: slow, fast,slow).
# Words select tests as in tests/run. Prints one line per round and a
# summary; exit 0 iff every round passed. Logs of a failing round stay in
# $NVS_BUILD/soak/round-K.log, and a failing test's temporary directory
# (its clients' outputs, event stream, scheduler log) stays where its log
# says "# kept". Beside the rounds, scripts/stall-monitor.py logs the
# moments the whole machine did not run a sleeping process for over 1 s,
# those a small file write in the temporary directory took over 1 s, and
# processes stopped or in D state for over 1 s
# ($NVS_BUILD/soak/stalls.log); each round's line counts them.
set -u
cd "$(dirname "$0")/.." || exit 1
rounds=20 san=0 burners=2 jobs=() tier=() words=()
while [ $# -gt 0 ]; do
	case "$1" in
	-n) rounds=$2; shift 2 ;;
	--san) san=1; shift ;;
	--burners) burners=$2; shift 2 ;;
	-j) jobs=(-j "$2"); shift 2 ;;
	--tier) tier=(--tier "$2"); shift 2 ;;
	-h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) words+=("$1"); shift ;;
	esac
done
case "$rounds$burners" in *[!0-9]*)
	echo "soak-tests: -n and --burners take numbers" >&2
	exit 2
	;;
esac
if [ "$san" = 1 ]; then
	export NVS_BUILD=build-san NVS_TEST_TIMEOUT=${NVS_TEST_TIMEOUT:-600}
	make -s -j"$(nproc)" SAN=1 >/dev/null || exit 1
else
	export NVS_BUILD=${NVS_BUILD:-build}
	make -s -j"$(nproc)" >/dev/null || exit 1
fi
export NVS_KEEP_FAILED=1
out=$NVS_BUILD/soak
mkdir -p "$out"

burner_pids=()
: >"$out/stalls.log"
python3 scripts/stall-monitor.py "$out/stalls.log" &
monitor=$!
stop_burners() {
	kill "$monitor" 2>/dev/null && wait "$monitor" 2>/dev/null
	local p
	for p in "${burner_pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${burner_pids[@]}"; do wait "$p" 2>/dev/null; done
	burner_pids=()
}
trap stop_burners EXIT
for _ in $(seq "$burners"); do
	# Bounded, so a killed soak leaves nothing spinning for long.
	timeout -k 5 36000 sh -c 'while :; do :; done' &
	burner_pids+=($!)
done

passed=0 start=$(date +%s)
for k in $(seq "$rounds"); do
	t0=$(date +%s)
	tests/run "${jobs[@]}" "${tier[@]}" "${words[@]}" >"$out/round-$k.log" 2>&1
	rc=$?
	last=$(tail -1 "$out/round-$k.log")
	t1=$(date +%s)
	# The stalls during the round, machine (sleep), file system (fs) and
	# stopped or blocked processes (proc): how many, the longest.
	st=$(awk -v a="$t0" -v b="$t1" '$1 >= a && $1 <= b + 1 {
			k = $7 == "fs" || $7 == "proc" ? $7 : "sleep"; n[k]++; if ($2 > m[k]) m[k] = $2 }
		END {
			if (n["sleep"]) printf "; machine stalls: %d, longest %.1f s", n["sleep"], m["sleep"]
			if (n["fs"]) printf "; file-system stalls: %d, longest %.1f s", n["fs"], m["fs"]
			if (n["proc"]) printf "; stopped/D processes: %d, longest %.1f s", n["proc"], m["proc"]
		}' "$out/stalls.log")
	printf 'round %2d/%d: %s (%ss%s)\n' "$k" "$rounds" "$last" "$((t1 - t0))" "$st"
	if [ "$rc" -ne 0 ]; then
		grep -E '^(FAIL|     )' "$out/round-$k.log" | head -40
		echo "soak: round $k failed after $passed good rounds; log: $out/round-$k.log"
		exit 1
	fi
	rm -f "$out/round-$k.log"
	passed=$((passed + 1))
done
echo "soak: $passed/$rounds rounds passed with $burners CPU burners ($NVS_BUILD, $(($(date +%s) - start)) s)"
