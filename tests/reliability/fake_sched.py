#!/usr/bin/env python3
"""A scheduler that misbehaves, for the client's failure tests.

    fake_sched.py SOCKET MODE [--ready FILE]

It speaks enough of the wire protocol (docs/protocol.md) to register one
client: it answers HELLO with WELCOME (and PONG(0) when the client asked for
pings) and every ATTACH_GPU with GPU_MODE(1), serialized. Then, by MODE:

  silent     never says anything again: REQ_LOCK and PING go unanswered
             (a scheduler that says "serialized" and never grants).
  nopong     the same, and it never announces PONG either (3e0f2f1's
             client pinged only schedulers that had: it waited forever).
  mute       accepts the connection and never says anything at all: no
             WELCOME, no GPU_MODE.
  dropflood  answers each REQ_LOCK with LOCK_OK and at once DROP_LOCK(grace
             0), a revocation, 2000 times; then grants the lock for good.

It touches FILE (--ready) once it listens, and FILE.flooded after a flood.
"""
import os
import socket
import struct
import sys

MAGIC, VERSION, HDR = 0x4853564E, 1, 16
HELLO, ATTACH_GPU, REQ_LOCK, PING = 1, 2, 3, 7
LOCK_OK, DROP_LOCK, GPU_MODE, WELCOME, PONG = 32, 33, 34, 37, 39
FLOOD = 2000
HELLO_PING = 0x2


def frame(mtype, payload, seq=0):
    return struct.pack("<IHHII", MAGIC, VERSION, mtype, len(payload), seq) + payload


def main():
    path, mode = sys.argv[1], sys.argv[2]
    ready = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--ready" else None
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path + ".new"
    if os.path.exists(tmp):
        os.unlink(tmp)
    srv.bind(tmp)
    srv.listen(16)
    os.rename(tmp, path)
    if ready:
        open(ready, "w").close()
    conn, _ = srv.accept()
    buf = b""
    revoked = 0
    while True:
        data = conn.recv(65536)
        if not data:
            return
        buf += data
        while len(buf) >= HDR:
            magic, _ver, mtype, plen, _seq = struct.unpack_from("<IHHII", buf)
            if magic != MAGIC or len(buf) < HDR + plen:
                break
            payload, buf = buf[HDR:HDR + plen], buf[HDR + plen:]
            if mode == "mute":
                continue
            if mtype == HELLO:
                flags = struct.unpack_from("<I", payload, 4)[0]
                conn.sendall(frame(WELCOME, struct.pack("<II", 1, 0)))
                if flags & HELLO_PING and mode != "nopong":
                    conn.sendall(frame(PONG, struct.pack("<II", 0, 0)))
            elif mtype == ATTACH_GPU:
                gpu = struct.unpack_from("<I", payload)[0]
                conn.sendall(frame(GPU_MODE, struct.pack("<II", gpu, 1)))
            elif mtype == REQ_LOCK and mode == "dropflood":
                gpu = struct.unpack_from("<I", payload)[0]
                grant = frame(LOCK_OK, struct.pack("<III", gpu, 0, 0))
                if revoked < FLOOD:
                    conn.sendall(grant + frame(DROP_LOCK, struct.pack("<III", gpu, 0, 0)))
                    revoked += 1
                    if revoked == FLOOD and ready:
                        open(ready + ".flooded", "w").close()
                else:
                    conn.sendall(grant)
            # PING and the rest: no answer.


if __name__ == "__main__":
    main()
