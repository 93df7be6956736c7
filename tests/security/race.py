#!/usr/bin/python3
"""The identity race of issue 31, N times (tests/security/t_pod_socket.sh).

  race.py SOCK PROC_ROOT LAYOUT POD_UID SCHED_PID N

Each try: the scheduler is stopped (SIGSTOP); a child of this process,
in Pod POD_UID (its fake cgroup written in LAYOUT, v1 or v2), connects to
SOCK, hands the connection to this process (SCM_RIGHTS) and exits. Once
the child is a zombie (exited, not reaped: waitid WNOWAIT), a v1 layout's
cgroup file is rewritten to what the kernel shows for an exiting task on
cgroup v1, the root of every hierarchy ("/"); v2 keeps the Pod's path, as
the kernel does. The scheduler is continued, so it accepts a connection
whose process is exiting: the race, every time. This process then speaks
as the client: HELLO (with PING), ATTACH_GPU, PING; everything the
scheduler sent for the ATTACH precedes the PONG. It records the limits
of the SET_LIMITS that came (or "none"), reaps the child, closes.

Prints one line per distinct outcome, "LIMITS core=C mem=M count=K"
("LIMITS none count=K" when no SET_LIMITS came), and "DONE tries=N".
"""
import os
import signal
import socket
import struct
import sys

MAGIC = 0x4853564E
VERSION = 1
HDR = struct.Struct("<IHHII")
SUB = "cri-containerd-" + "ab" * 32

V1_CONTROLLERS = ["12:pids", "11:memory", "10:cpu,cpuacct", "9:blkio", "8:devices",
                  "7:freezer", "6:net_cls,net_prio", "5:perf_event", "4:hugetlb",
                  "3:cpuset", "2:rdma", "1:name=systemd"]


def cgroup_text(layout, uid, exiting):
    u = uid.replace("-", "_")
    if layout == "v2":
        return ("0::/kubepods.slice/kubepods-burstable.slice/"
                "kubepods-burstable-pod%s.slice/%s.scope\n" % (u, SUB))
    if exiting:  # cgroup v1 after cgroup_exit(): the root everywhere
        return "".join("%s:/\n" % c for c in V1_CONTROLLERS)
    return "".join("%s:/kubepods/burstable/pod%s/%s\n" % (c, uid, "ab" * 32)
                   for c in V1_CONTROLLERS)


def write_cgroup(proc, pid, text):
    d = os.path.join(proc, str(pid))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, "cgroup.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(d, "cgroup"))


def msg(mtype, payload, seq):
    return HDR.pack(MAGIC, VERSION, mtype, len(payload), seq) + payload


def hello(seq):
    name = b"race"
    p = struct.pack("<IIIQ", os.getpid(), 0x2, 100, 0) + struct.pack("<H", len(name)) + name
    return msg(1, p, seq)


def attach(seq):
    uuid = b"GPU-race"
    p = struct.pack("<IQQ", 0, 16 << 30, 0) + struct.pack("<H", len(uuid)) + uuid
    return msg(2, p, seq)


def ping(seq, token):
    return msg(7, struct.pack("<II", 0, token), seq)


def read_until_pong(s, token):
    """The SET_LIMITS seen before the PONG of token: (core, mem) or None."""
    buf = b""
    limits = None
    s.settimeout(30)
    while True:
        while len(buf) < HDR.size or len(buf) < HDR.size + HDR.unpack_from(buf)[3]:
            d = s.recv(65536)
            if not d:
                raise RuntimeError("closed by the scheduler")
            buf += d
        _, _, mtype, length, _ = HDR.unpack_from(buf)
        body = buf[HDR.size:HDR.size + length]
        buf = buf[HDR.size + length:]
        if mtype == 35:
            _, core, mem = struct.unpack_from("<IIQ", body)
            limits = (core, mem)
        elif mtype == 39 and struct.unpack_from("<II", body)[1] == token:
            return limits


def one(sock, proc, layout, uid, sched):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    os.kill(sched, signal.SIGSTOP)
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                a.close()
                write_cgroup(proc, os.getpid(), cgroup_text(layout, uid, False))
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.connect(sock)
                socket.send_fds(b, [b"x"], [c.fileno()])
                code = 0
            finally:
                os._exit(code)
        b.close()
        _, fds, _, _ = socket.recv_fds(a, 1, 1)
        a.close()
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # a zombie now
        if layout == "v1":
            write_cgroup(proc, pid, cgroup_text(layout, uid, True))
    finally:
        os.kill(sched, signal.SIGCONT)
    s = socket.socket(fileno=fds[0])
    try:
        s.sendall(hello(1) + attach(2) + ping(3, 77))
        lim = read_until_pong(s, 77)
    finally:
        os.waitpid(pid, 0)
        s.close()
    return lim


def main():
    sock, proc, layout, uid, sched, n = sys.argv[1:7]
    sched, n = int(sched), int(n)
    if layout not in ("v1", "v2"):
        sys.exit("LAYOUT is v1 or v2")
    seen = {}
    for _ in range(n):
        lim = one(sock, proc, layout, uid, sched)
        seen[lim] = seen.get(lim, 0) + 1
    for lim, k in sorted(seen.items(), key=lambda x: -x[1]):
        if lim is None:
            print("LIMITS none count=%d" % k)
        else:
            print("LIMITS core=%d mem=%d count=%d" % (lim[0], lim[1], k))
    print("DONE tries=%d" % n, flush=True)


main()
