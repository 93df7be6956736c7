#!/usr/bin/env bash
# The precedence of limits end to end (docs/quotas.md "Setting limits"),
# on a client in an annotated Pod attached to two GPUs: per-GPU nvsharectl
# (-g N) > client-wide nvsharectl > Pod annotation > HELLO (environment),
# each field on its own. `--core-limit default -g N` goes back to what the
# client would have without it (the client-wide value, else the
# annotation), an annotation change leaves a per-GPU override alone, and a
# client-wide value replaces the per-GPU ones of its field. The table
# itself is tested in process (tests/sched/t_limits.c).
# shellcheck disable=SC1091 # libs by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/k8s_lib.sh"

GI=$((1 << 30)); MI=$((1 << 20)); NONE=18446744073709551615
UP=0a1b2c3d-0000-4000-8000-0000000000a1

one_pod_scheduler "$UP" nb team-a 40 2Gi || exit 1

# glimits NAME GPU: "core mem" of NAME's last SET_LIMITS for its GPU GPU.
glimits() {
  grep -E " SET_LIMITS gpu=$2 " "$T/$1.out" | tail -1 |
    sed -E 's/.*core_limit=([0-9]+) mem_limit=([0-9]+).*/\1 \2/'
}
# both_are NAME CORE0 MEM0 CORE1 MEM1: the limits in force on its GPUs 0, 1.
both_are() { [ "$(glimits "$1" 0)" = "$2 $3" ] && [ "$(glimits "$1" 1)" = "$4 $5" ]; }

fcpod A "$(cg_systemd_v2 "$UP")" --gpu-uuid GPU-l0 --gpu-uuid GPU-l1 \
  --core-limit 70 --mem-limit 1Gi --script stay
check "at start the annotation beats HELLO on both GPUs (40 %, 2Gi)" \
  wait_for 3 both_are A 40 $((2 * GI)) 40 $((2 * GI))

"$CTL" --set-client "$PID_A" -g 0 --core-limit 20 >/dev/null
check "-g 0 --core-limit 20: GPU 0 only" wait_for 3 both_are A 20 $((2 * GI)) 40 $((2 * GI))
"$CTL" --set-client "$PID_A" -g 0 --core-limit default >/dev/null
check "-g 0 --core-limit default: back to the annotation (40 %), not HELLO's 70 %" \
  wait_for 3 both_are A 40 $((2 * GI)) 40 $((2 * GI))

"$CTL" --set-client "$PID_A" -g 0 --core-limit 20 --memory-limit 512 >/dev/null
wait_for 3 both_are A 20 $((512 * MI)) 40 $((2 * GI))
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{\"nvshare.com/gpu-core-limit\":\"50\",\"nvshare.com/gpu-memory-limit\":\"3Gi\"}}"
# GPU 1's SET_LIMITS is the marker: both GPUs' go out in one turn, GPU 0's
# first, so a change to GPU 0 would already be there.
check "an annotation change reaches GPU 1 (50 %, 3Gi) and leaves GPU 0's override (20 %, 512Mi)" \
  wait_for 3 both_are A 20 $((512 * MI)) 50 $((3 * GI))

"$CTL" --set-client "$PID_A" --core-limit 15 >/dev/null
check "client-wide --core-limit 15 replaces GPU 0's core override; its memory override stays" \
  wait_for 3 both_are A 15 $((512 * MI)) 15 $((3 * GI))
"$CTL" --set-client "$PID_A" --core-limit default >/dev/null
check "client-wide --core-limit default: the annotation's 50 % on both" \
  wait_for 3 both_are A 50 $((512 * MI)) 50 $((3 * GI))
"$CTL" --set-client "$PID_A" --memory-limit none >/dev/null
check "client-wide --memory-limit none replaces GPU 0's memory override" \
  wait_for 3 both_are A 50 $NONE 50 $NONE
api_cmd "{\"op\":\"modify\",\"uid\":\"$UP\",\"annotations\":{}}"
check "annotations removed: HELLO's 70 % (the ctl memory 'none' stays)" \
  wait_for 3 both_are A 70 $NONE 70 $NONE
check "the scheduler is alive" sched_alive
