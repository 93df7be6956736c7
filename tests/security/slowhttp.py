#!/usr/bin/python3
"""Slow HTTP peers of the metrics exporter (issue 31 item 4;
tests/security/t_hostile_http.sh).

  slowhttp.py HOST PORT N --until FILE [--interval SECONDS]

Keeps N connections open to HOST:PORT, each sending a request head one
byte at a time, one byte per connection every --interval seconds (0.5),
never finishing it; a connection the server closes is opened again at
once (a determined attacker). Prints "READY open=N" once N are open, and
at the end "DONE reconnects=R".
"""
import os
import selectors
import socket
import sys
import time

HEAD = b"GET /metrics HTTP/1.1\r\nHost: nvshare\r\nUser-Agent: slow\r\n" + b"X-Pad: " + b"a" * 4000


def main():
    host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    until, interval = None, 0.5
    a = sys.argv[4:]
    for i in range(0, len(a), 2):
        if a[i] == "--until":
            until = a[i + 1]
        elif a[i] == "--interval":
            interval = float(a[i + 1])
    sel = selectors.DefaultSelector()
    conns = {}  # socket -> bytes sent
    reconnects = 0

    def opened():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            return False
        conns[s] = 0
        sel.register(s, selectors.EVENT_READ)
        return True

    def gone(s):
        sel.unregister(s)
        del conns[s]
        s.close()

    while len(conns) < n:
        if not opened():
            time.sleep(0.01)
    print("READY open=%d" % len(conns), flush=True)
    next_round = time.monotonic()
    while not (until and os.path.exists(until)):
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                if s.recv(4096):
                    continue
            except BlockingIOError:
                continue
            except OSError:
                pass
            gone(s)
        now = time.monotonic()
        if now >= next_round:
            next_round = now + interval
            for s in list(conns):
                k = conns[s] % len(HEAD)
                try:
                    s.send(HEAD[k:k + 1])
                    conns[s] += 1
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    gone(s)
        while len(conns) < n and opened():
            reconnects += 1
    print("DONE reconnects=%d" % reconnects, flush=True)


if __name__ == "__main__":
    main()
