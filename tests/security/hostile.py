#!/usr/bin/python3
"""A hostile peer of the scheduler's client socket (issue 17; the tests
tests/security/t_hostile_*.sh run it as uid 65534 where they can).

  hostile.py SOCK MODE N [--until FILE] [--hold SECONDS] [--requests K]

MODE:
  slowloris  N connections each announce a full-size frame (256 KiB) and
             send all of it but the last byte
  slowread   N connections each send K CTL_STATUS requests and never read
  idle       N connections that send nothing
  churn      connect, send garbage, close, in a loop (N: parallel sockets
             per round), for --hold seconds
  churn-hello  the same with a valid HELLO instead of garbage
  pingflood  one connection: HELLO, then N PINGs as fast as the PONGs come
             back (prints "DONE sent=S answered=A ...")
  register   N connections that each send HELLO and read what comes
  ctl-late   one connection (N: seconds to wait first) that then asks for
             the status (streamed) and prints "REPLY status=S bytes=B
             frames=F" (an nvsharectl that is slow to speak)

Prints "READY opened=O failed=F" once the connections are set up (for
churn: at the start), "SENT" once every connection sent all it meant to
or was closed, then, once FILE exists or --hold seconds passed,
"DONE opened=O closed_by_peer=C failed=F rounds=R" and exits 0.
"""
import errno
import os
import selectors
import socket
import struct
import sys
import time

MAGIC = 0x4853564E
VERSION = 1
MAX_PAYLOAD = 256 * 1024


def header(mtype, length, seq=1):
    return struct.pack("<IHHII", MAGIC, VERSION, mtype, length, seq)


def hello(name=b"hostile", flags=0):
    payload = struct.pack("<IIIQ", os.getpid(), flags, 100, 0xFFFFFFFFFFFFFFFF)
    payload += struct.pack("<H", len(name)) + name
    return header(1, len(payload)) + payload


def ctl_status(seq):
    return header(66, 4, seq) + struct.pack("<I", 0)


def connect(path, timeout=5):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    s.setblocking(False)
    return s


def main():
    argv = sys.argv[1:]
    path, mode, n = argv[0], argv[1], int(argv[2])
    until, hold, requests = None, 30.0, 2000
    i = 3
    while i < len(argv):
        if argv[i] == "--until":
            until = argv[i + 1]
        elif argv[i] == "--hold":
            hold = float(argv[i + 1])
        elif argv[i] == "--requests":
            requests = int(argv[i + 1])
        else:
            sys.exit("unknown option " + argv[i])
        i += 2
    end = time.monotonic() + hold

    def done():
        return (until and os.path.exists(until)) or time.monotonic() >= end

    if mode == "ctl-late":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        time.sleep(n)
        s.settimeout(10)
        s.sendall(header(66, 4, 7) + struct.pack("<I", 1))
        buf, text, frames = b"", b"", 0
        while True:
            while len(buf) < 16 or len(buf) < 16 + struct.unpack("<I", buf[8:12])[0]:
                r = s.recv(65536)
                if not r:
                    print("REPLY closed bytes=%d frames=%d" % (len(text), frames), flush=True)
                    return
                buf += r
            length = struct.unpack("<I", buf[8:12])[0]
            body, buf = buf[16:16 + length], buf[16 + length:]
            status, tlen = struct.unpack("<iI", body[:8])
            text += body[8:8 + tlen]
            frames += 1
            if status != 1:
                print("REPLY status=%d bytes=%d frames=%d" % (status, len(text), frames),
                      flush=True)
                return

    if mode == "pingflood":
        # One connection: HELLO (asking for PONG), then PINGs as fast as
        # the scheduler answers them, reading every PONG (no back-pressure:
        # only what each PING costs), N in all or until --hold/--until.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(hello(flags=0x2))
        print("READY opened=1 failed=0", flush=True)
        batch = b"".join(header(7, 8, k) + struct.pack("<II", 0, k) for k in range(1, 101))
        sent = answered = 0
        buf = b""
        while sent < n and not done():
            s.sendall(batch)
            sent += 100
            while answered < sent:
                r = s.recv(65536)
                if not r:
                    print("DONE sent=%d answered=%d closed_by_peer=1" % (sent, answered),
                          flush=True)
                    return
                buf += r
                while len(buf) >= 16:
                    length = struct.unpack("<I", buf[8:12])[0]
                    if len(buf) < 16 + length:
                        break
                    # PONG, not the announcement (token 0) HELLO gets
                    if struct.unpack("<H", buf[6:8])[0] == 39 and buf[20:24] != b"\0\0\0\0":
                        answered += 1
                    buf = buf[16 + length:]
        print("DONE sent=%d answered=%d closed_by_peer=0" % (sent, answered), flush=True)
        return

    if mode in ("churn", "churn-hello"):
        payload = hello() if mode == "churn-hello" else \
            b"GET / HTTP/1.0\r\n\r\n garbage, not a frame"
        rounds = opened = failed = 0
        print("READY opened=0 failed=0", flush=True)
        while not done():
            socks = []
            for _ in range(n):
                if done():
                    break
                try:
                    # A full backlog (the scheduler holding a churner
                    # back) blocks connect(): a short timeout, so the
                    # churn still ends on time, the attempt counted failed.
                    s = connect(path, 0.25)
                    opened += 1
                    try:
                        s.send(payload)
                    except OSError:
                        pass
                    socks.append(s)
                except OSError:
                    failed += 1
            for s in socks:
                s.close()
            rounds += 1
        print("DONE opened=%d closed_by_peer=0 failed=%d rounds=%d" % (opened, failed, rounds),
              flush=True)
        return

    sel = selectors.DefaultSelector()
    conns = []  # [sock, bytes to send, offset, closed]
    failed = 0
    for k in range(n):
        try:
            s = connect(path)
        except OSError:
            failed += 1
            continue
        if mode == "slowloris":
            data = header(1, MAX_PAYLOAD) + b"x" * (MAX_PAYLOAD - 1)
        elif mode == "slowread":
            data = b"".join(ctl_status(j + 1) for j in range(requests))
        elif mode == "register":
            data = hello()
        elif mode == "idle":
            data = b""
        else:
            sys.exit("unknown mode " + mode)
        c = [s, data, 0, False]
        conns.append(c)
        sel.register(s, selectors.EVENT_READ | (selectors.EVENT_WRITE if data else 0), c)
    print("READY opened=%d failed=%d" % (len(conns), failed), flush=True)

    closed = 0
    sent_said = False
    while not done():
        if not sent_said and all(c[3] or c[2] >= len(c[1]) for c in conns):
            print("SENT closed_by_peer=%d" % closed, flush=True)
            sent_said = True
        for key, ev in sel.select(timeout=0.1):
            c = key.data
            s = c[0]
            if ev & selectors.EVENT_WRITE and c[2] < len(c[1]):
                try:
                    c[2] += s.send(c[1][c[2]:c[2] + 65536])
                except BlockingIOError:
                    pass
                except OSError:
                    c[3] = True
                if c[2] >= len(c[1]) and not c[3]:
                    sel.modify(s, selectors.EVENT_READ, c)
            if ev & selectors.EVENT_READ and not c[3] and mode != "slowread":
                try:
                    if not s.recv(65536):
                        c[3] = True
                except BlockingIOError:
                    pass
                except OSError:
                    c[3] = True
            if c[3]:
                closed += 1
                sel.unregister(s)
        if mode == "slowread":
            # Never read: a closed connection shows as a failed send or a
            # readable EOF we do not consume; poll the latter cheaply.
            pass
    if mode == "slowread":
        for c in conns:
            if c[3]:
                continue
            try:
                c[0].send(b"")
                r = c[0].recv(1, socket.MSG_PEEK)
                if r == b"":
                    c[3] = True
                    closed += 1
            except BlockingIOError:
                pass
            except OSError as e:
                if e.errno != errno.EAGAIN:
                    c[3] = True
                    closed += 1
    print("DONE opened=%d closed_by_peer=%d failed=%d rounds=1" % (len(conns), closed, failed),
          flush=True)


if __name__ == "__main__":
    main()
