#!/usr/bin/python3
"""Connect-then-exit (tests/security/t_identity.sh): a process in a Pod
connects to the scheduler's client socket, hands the connection to its
child and exits before the scheduler accepts it; the child speaks as a
client through the inherited socket (fake_client --fd 3).

  escape.py PROC_ROOT CGROUP SOCK SCHED_PID [--prime] -- FAKE_CLIENT ARGS...

The parent writes PROC_ROOT/<its pid>/cgroup = CGROUP first. --prime: it
first makes one ordinary connection that the scheduler accepts (proved by
the scheduler closing it for a malformed frame), so that its pid is seen in
the Pod once. It then stops the scheduler (SIGSTOP) so that the next
connection is accepted only after the parent has exited: the test sends
SIGCONT once this script's process is gone.
"""
import os
import signal
import socket
import sys
import time


def main():
    argv = sys.argv[1:]
    sep = argv.index("--")
    opts, client = argv[:sep], argv[sep + 1:]
    prime = "--prime" in opts
    proc, cgroup, sock, sched_pid = [o for o in opts if o != "--prime"]
    me = os.getpid()
    os.makedirs(os.path.join(proc, str(me)), exist_ok=True)
    with open(os.path.join(proc, str(me), "cgroup"), "w") as f:
        f.write(cgroup + "\n")
    if prime:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        s.sendall(b"not a frame, not a frame, not a frame")
        s.settimeout(5)
        if s.recv(64) != b"":
            sys.exit("prime connection not closed by the scheduler")
        s.close()
        print("PRIMED", flush=True)
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
