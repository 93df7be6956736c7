#!/usr/bin/env bash
# nvs-test: slow (1,000 registered clients)
# Status at any scale (issue 17): with 1,000 registered clients the status
# is about 1 MB, four times what one message holds. nvsharectl asks for it
# streamed (CTL_STATUS flag STREAM: several CTL_REPLY frames) and gets all
# 1,000 clients, in JSON and as the table; the tenant view through the
# client socket works the same way; a request without the flag (an older
# nvsharectl) gets -E2BIG with a message, never a cut status.
# shellcheck disable=SC1091 # libraries by path
. "$(dirname "$0")/../lib.sh"
. "$NVS_ROOT/tests/sched/sched_lib.sh"
. "$(dirname "$0")/hostile_lib.sh"
LG=$B/tests/reliability/load_gen

# One tenant registers 1,000 clients: the per-tenant cap is lifted.
start_scheduler --no-nvml --mode on --max-conns-per-tenant 0 || { not_ok "scheduler starts"; exit 1; }
bg "$LG" --clients 1000 --gpus 4 --attach --hold-ms 60000 >"$T/hold.out" 2>&1
nclients() { "$CTL" --json | "$HPY" -c 'import json,sys; print(len(json.load(sys.stdin)["clients"]))'; }
has_1000() { [ "$(nclients)" = 1000 ]; }
check "1,000 clients registered (nvsharectl --json lists them all)" wait_for 60 has_1000
"$CTL" --json >"$T/st.json"
bytes=$(wc -c <"$T/st.json")
diag "status JSON with 1,000 clients: $bytes bytes"
check "the status is larger than one message ($bytes > 262144)" [ "$bytes" -gt 262144 ]
check "it is valid JSON" "$HPY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/st.json"
check "the table view works" sh -c "'$CTL' >'$T/st.txt' && [ \$(wc -l <'$T/st.txt') -gt 1000 ]"
check "the tenant view (client socket) works" sh -c "'$CTL' --tenant --json >/dev/null"
"$HPY" - "$NVSHARE_ADMIN_SOCK_DIR/admin.sock" >"$T/old.out" 2>&1 <<'EOF'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(struct.pack("<IHHII", 0x4853564E, 1, 66, 4, 9) + struct.pack("<I", 0))
s.settimeout(10)
buf = b""
while len(buf) < 24 or len(buf) < 16 + struct.unpack("<I", buf[8:12])[0]:
    r = s.recv(65536)
    if not r:
        break
    buf += r
status, n = struct.unpack("<iI", buf[16:24])
print("status=%d text=%s" % (status, buf[24:24 + n].decode()))
EOF
diag "$(cut -c1-200 "$T/old.out")"
check "a request without the stream flag gets -E2BIG and a message" grep -q '^status=-7 text=status is' "$T/old.out"
check "scheduler alive" sched_alive
