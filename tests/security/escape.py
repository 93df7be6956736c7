#!/usr/bin/python3
"""Connect-then-exit (tests/security/t_identity.sh): a process in a Pod
connects to the scheduler's client socket, hands the connection to its
child and exits before the scheduler accepts it; the child speaks as a
client through the inherited socket (fake_client --fd 3).

  escape.py PROC_ROOT CGROUP SOCK SCHED_PID [--prime [--flood N FLOOD_CGROUP]]
            -- FAKE_CLIENT ARGS...

The parent writes PROC_ROOT/<its pid>/cgroup = CGROUP first. --prime: it
first makes one ordinary connection that the scheduler accepts (proved by
the scheduler closing it for a malformed frame), so that its pid is seen in
the Pod once. --flood N FLOOD_CGROUP: then N other processes, each in
FLOOD_CGROUP (a Pod: only identified peers enter the scheduler's pid
history), each make one such connection, 16 at a time, so that the
history's entries are pushed out. It then stops the scheduler (SIGSTOP) so
that the next connection is accepted only after the parent has exited: the
test sends SIGCONT once this script's process is gone.
"""
import os
import signal
import socket
import sys
import time


def in_cgroup(proc, pid, cgroup):
    os.makedirs(os.path.join(proc, str(pid)), exist_ok=True)
    with open(os.path.join(proc, str(pid), "cgroup"), "w") as f:
        f.write(cgroup + "\n")


def seen_once(sock):
    """One connection the scheduler accepts and closes (a malformed frame):
    True once it was closed."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.sendall(b"not a frame, not a frame, not a frame")
    s.settimeout(10)
    closed = s.recv(64) == b""
    s.close()
    return closed


def flood(proc, cgroup, sock, n):
    """n processes of cgroup, each seen once; returns how many were."""
    seen = running = 0
    started = 0
    while started < n or running:
        while started < n and running < 16:
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    in_cgroup(proc, os.getpid(), cgroup)
                    code = 0 if seen_once(sock) else 1
                finally:
                    os._exit(code)
            started += 1
            running += 1
        _, status = os.wait()
        running -= 1
        seen += os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return seen


def main():
    argv = sys.argv[1:]
    sep = argv.index("--")
    opts, client = argv[:sep], argv[sep + 1:]
    prime = "--prime" in opts
    nflood, flood_cgroup = 0, None
    if "--flood" in opts:
        i = opts.index("--flood")
        nflood, flood_cgroup = int(opts[i + 1]), opts[i + 2]
        del opts[i:i + 3]
    proc, cgroup, sock, sched_pid = [o for o in opts if o != "--prime"]
    me = os.getpid()
    in_cgroup(proc, me, cgroup)
    if prime:
        if not seen_once(sock):
            sys.exit("prime connection not closed by the scheduler")
        print("PRIMED", flush=True)
    if nflood:
        print("FLOODED %d of %d" % (flood(proc, flood_cgroup, sock, nflood), nflood),
              flush=True)
    os.kill(int(sched_pid), signal.SIGSTOP)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    child = os.fork()
    if child == 0:
        # Wait until the parent is gone (re-parented), then become the
        # client on the inherited connection.
        while os.getppid() == me:
            time.sleep(0.005)
        # When the socket already is fd 3 (nothing else open), dup2 is a
        # no-op that leaves Python's close-on-exec flag: clear it.
        if s.fileno() != 3:
            os.dup2(s.fileno(), 3)
        os.set_inheritable(3, True)
        os.execv(client[0], client + ["--fd", "3"])
    print("HANDED connection to pid %d; exiting" % child, flush=True)
    os._exit(0)


main()
