#!/usr/bin/env bash
# nvs-test: long
# bench/run --selftest: the GPU benchmark's whole pipeline (plan, schedulers
# or their stand-ins, worker protocol, every scenario, report, results.json)
# with fake workers, so a change that breaks the benchmark is caught here and
# not on the GPU machine, where device time is scarce. Shortened: one
# repetition, 1 s quota intervals, 500 ms windows.
. "$(dirname "$0")/../lib.sh"
OUTD=$T/bench
docs_before=$(md5sum <"$NVS_ROOT/docs/BENCHMARKS.md")
out=$(cd "$NVS_ROOT" && OUT=$OUTD NVS_BUILD=$B BENCH_PRELOAD=$PRELOAD BENCH_QUOTA_REPS=1 BENCH_QUOTA_MEASURE=1 \
  BENCH_QUOTA_WINDOW_MS=500 BENCH_DEADLINE=200 BENCH_HARD_LIMIT=240 \
  timeout 300 bench/run --selftest 2>&1); rc=$?
check "bench/run --selftest exits 0" test "$rc" = 0
[ "$rc" = 0 ] || diag "$(echo "$out" | tail -20)"
check "report written" test -s "$OUTD/bench.md"
for h in "Targets" "Overhead of a single job" "Two jobs that fit together" "Idle release" \
  "Interactive beside batch" "Memory pressure" "Scheduler costs" "Compute quotas"; do
  check "report has section: $h" grep -q "^### $h" "$OUTD/bench.md"
done
check "the command line is in the report" grep -q 'bench/run --selftest' "$OUTD/bench.md"
# results.json: every scenario present, none reports an error (nor a
# failed tool), every quota case measured.
chk=$(python3 - "$OUTD/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
bad = []
for s in ("overhead", "fit", "idle", "interactive", "pressure", "sched_latency", "quota"):
    if s not in r:
        bad.append("missing " + s)
def errors(x, path):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "error" and v:
                bad.append("%s: %s" % (path, v))
            errors(v, path + "." + k)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            errors(v, "%s[%d]" % (path, i))
errors(r, "results")
lat = r.get("sched_latency", {})
if lat.get("rc"):
    bad.append("sched_latency exit %s: %s" % (lat["rc"], lat.get("stderr", "").strip()[-300:]))
q = r.get("quota", {})
if len(q.get("cases", [])) != 6:
    bad.append("quota cases: %d of 6" % len(q.get("cases", [])))
if len(q.get("more", [])) != 3:
    bad.append("quota other cases: %d of 3" % len(q.get("more", [])))
print("; ".join(bad) or "ok")
PY
)
check "results.json: all scenarios, no errors, all quota cases ($chk)" test "$chk" = ok
check "docs/BENCHMARKS.md left alone (--selftest implies --no-docs)" \
  test "$(md5sum <"$NVS_ROOT/docs/BENCHMARKS.md")" = "$docs_before"
# Every process of the run (schedulers, workers, their timeout wrappers)
# inherits BENCH_LOGDIR=$OUTD from bench/run.
no_leftovers() { ! grep -qsz "^BENCH_LOGDIR=$OUTD\$" /proc/[0-9]*/environ; }
check "no process of the run left behind" no_leftovers
