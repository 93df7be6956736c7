# shellcheck shell=bash disable=SC2154
# Helpers for the security tests (source after tests/lib.sh,
# tests/sched/sched_lib.sh and tests/k8s_watch/k8s_lib.sh): nvsharectl run
# from inside a fake Pod, and JSON checks in Python (no jq in CI).

# pod_ctl UID ARGS...: nvsharectl as a process of Pod UID (its fake cgroup
# written for its own pid before it connects), uid 0 like most containers.
pod_ctl() {
  local uid=$1; shift
  # shellcheck disable=SC2016 # expanded by the inner shell
  sh -c 'd=$1/$$; mkdir -p "$d"; printf "%s\n" "$2" >"$d/cgroup"; shift 2; exec "$@"' \
    sh "$PROC" "$(cg_systemd_v2 "$uid")" "$B/nvsharectl" "$@"
}

# unknown_ctl ARGS...: nvsharectl with no cgroup file in the fake proc
# root: the scheduler cannot tell who it is (an unknown tenant).
unknown_ctl() { "$B/nvsharectl" "$@"; }

# jpy JSON EXPR: evaluates the Python expression EXPR with j = the parsed
# JSON; exit 1 (printing the value as a TAP comment) if it raises or is
# falsy (for check).
jpy() {
  "$PY" -c 'import json,sys
j = json.loads(sys.argv[1])
v = eval(sys.argv[2])
if not v: print("# got %r" % (v,))
sys.exit(0 if v else 1)' "$1" "$2"
}

# pids_of JSON: the host pids of the status's clients, sorted, one line.
pids_of() { "$PY" -c 'import json,sys; print(" ".join(str(p) for p in sorted(c["pid"] for c in json.loads(sys.argv[1])["clients"])))' "$1"; }
# sorted_pids PID...: the same form, for comparing.
sorted_pids() { printf '%s\n' "$@" | sort -n | tr '\n' ' ' | sed 's/ $//'; }

# pods_api UID:NAMESPACE/NAME:CORE:MEM_MIB...: the fake API server (token
# token-S, $T/token) knowing these Pods, each with its annotation limits.
pods_api() {
  mkcerts || { not_ok "openssl makes a CA and a server certificate"; return 1; }
  printf 'token-S\n' >"$T/token"
  "$PY" - "$T/pods.json" "$@" <<'EOF_PY'
import json, sys
pods = []
for spec in sys.argv[2:]:
    uid, nsname, core, mem = spec.split(":")
    ns, name = nsname.split("/")
    pods.append({"uid": uid, "name": name, "namespace": ns, "annotations": {
        "nvshare.com/gpu-core-limit": core, "nvshare.com/gpu-memory-limit": mem}})
json.dump(pods, open(sys.argv[1], "w"))
EOF_PY
  start_api token-S "$T/pods.json" || { not_ok "fake API server starts"; return 1; }
}
