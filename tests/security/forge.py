#!/usr/bin/python3
"""A client that forges what it tells the scheduler (issue 31 items 6 and 7;
tests/security/t_gpu_uuids.sh, t_claims_evidence.sh). Speaks the client
protocol directly (common/protocol.h), with no GPU behind it.

  forge.py SOCK uuids N PREFIX [--total BYTES] [--until FILE]
      N connections, each HELLO and ATTACH_GPU of one made-up UUID,
      PREFIX-0 .. PREFIX-<N-1> (a refused ATTACH closes its connection,
      with every GPU attached on it). Prints
      "ATTACHED accepted=A refused=R", then keeps the connections open
      until FILE exists (default: exits at once).
  forge.py SOCK uuid STRING [--total BYTES]
      one ATTACH_GPU with the UUID STRING as given (any bytes, a newline
      included); prints "ACCEPTED" or "REFUSED".

An ATTACH is accepted when the scheduler answers it with GPU_MODE for that
GPU, refused when it closes the connection instead.
"""
import os
import socket
import struct
import sys
import time

MAGIC = 0x4853564E
VERSION = 1
HELLO, ATTACH_GPU, GPU_MODE = 1, 2, 34


def frame(mtype, payload, seq=1):
    return struct.pack("<IHHII", MAGIC, VERSION, mtype, len(payload), seq) + payload


def hello(name=b"forge"):
    p = struct.pack("<IIIQ", os.getpid(), 0, 100, 0xFFFFFFFFFFFFFFFF)
    return frame(HELLO, p + struct.pack("<H", len(name)) + name)


def attach(local, uuid, total, allocated=0):
    p = struct.pack("<IQQ", local, total, allocated)
    return frame(ATTACH_GPU, p + struct.pack("<H", len(uuid)) + uuid)


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(10)
        self.s.connect(path)
        self.buf = b""
        self.s.sendall(hello())

    def wait_mode(self, local):
        """True once GPU_MODE for local arrives, False on EOF."""
        while True:
            while len(self.buf) >= 16:
                length = struct.unpack("<I", self.buf[8:12])[0]
                if len(self.buf) < 16 + length:
                    break
                mtype = struct.unpack("<H", self.buf[6:8])[0]
                body, self.buf = self.buf[16:16 + length], self.buf[16 + length:]
                if mtype == GPU_MODE and struct.unpack("<I", body[:4])[0] == local:
                    return True
            try:
                r = self.s.recv(65536)
            except OSError:
                return False
            if not r:
                return False
            self.buf += r


def main():
    a = sys.argv[1:]
    path, mode = a[0], a[1]
    total, until = 16 << 30, None
    rest = a[2:]
    pos = []
    i = 0
    while i < len(rest):
        if rest[i] == "--total":
            total = int(rest[i + 1])
            i += 2
        elif rest[i] == "--until":
            until = rest[i + 1]
            i += 2
        else:
            pos.append(rest[i])
            i += 1
    if mode == "uuid":
        c = Conn(path)
        c.s.sendall(attach(0, os.fsencode(pos[0]), total))
        print("ACCEPTED" if c.wait_mode(0) else "REFUSED", flush=True)
        return
    if mode != "uuids":
        sys.exit("unknown mode " + mode)
    n, prefix = int(pos[0]), pos[1]
    accepted = refused = 0
    conns = []
    for k in range(n):
        # One connection each: a refused ATTACH ends its connection, and
        # with it every GPU attached on it.
        c = Conn(path)
        c.s.sendall(attach(0, ("%s-%d" % (prefix, k)).encode(), total))
        if c.wait_mode(0):
            accepted += 1
            conns.append(c)
        else:
            refused += 1
            c.s.close()
    print("ATTACHED accepted=%d refused=%d" % (accepted, refused), flush=True)
    while until and not os.path.exists(until):
        time.sleep(0.05)


if __name__ == "__main__":
    main()
