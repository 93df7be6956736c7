#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_conn (tests/fuzz/corpus/conn): short
sessions of well-formed frames over up to 4 connections, in the input format
described in tests/fuzz/fuzz_conn.c. Run from the repository root."""
import os
import struct

MAGIC, VER = 0x4853564E, 1


def frame(t, payload, seq=1):
    return struct.pack('<IHHII', MAGIC, VER, t, len(payload), seq) + payload


def s(b):
    return struct.pack('<H', len(b)) + b


def hello(name=b'app', core=100, mem=2**64 - 1):
    return frame(1, struct.pack('<IIIQ', 1234, 0, core, mem) + s(name))


def attach(local=0, uuid=b'GPU-fuzz-0', total=16 << 30, alloc=1 << 30):
    return frame(2, struct.pack('<IQQ', local, total, alloc) + s(uuid))


def req(local=0):
    return frame(3, struct.pack('<II', local, 0))


def rel(local=0, flags=0):
    return frame(4, struct.pack('<IIQ', local, flags, 1000))


def mem(local=0, alloc=20 << 30):
    return frame(5, struct.pack('<IQ', local, alloc))


def swap(local=0):
    return frame(6, struct.pack('<IQQQQ', local, 1, 2, 3, 4))


def ctl_set(gpu=-1, field=1, value=1):
    return frame(64, struct.pack('<iIQ', gpu, field, value))


def ctl_client(pid=0, gpu=-1, core=50, flags=1, mem=4 << 30):
    return frame(65, struct.pack('<IiIIQ', pid, gpu, core, flags, mem))


def status():
    return frame(66, struct.pack('<I', 0))


def data(conn, b):
    return bytes([conn & 3]) + struct.pack('<H', len(b)) + b


def close(conn):
    return bytes([(4 << 2) | conn])


def tick(secs):
    return bytes([5 << 2, secs])


def reopen(conn):
    return bytes([(7 << 2) | conn])


seeds = {
    'lock_cycle_on': bytes([1]) + data(0, hello() + attach() + req()) +
    data(1, hello(b'b') + attach() + req()) + data(0, rel()) + data(1, rel()),
    'auto_oversubscribed': bytes([2]) + data(0, hello() + attach(alloc=10 << 30)) +
    data(1, hello(b'b') + attach(alloc=10 << 30) + req()) + data(0, req() + mem(alloc=1 << 20)),
    'revoke': bytes([1]) + data(0, hello() + attach() + req()) +
    data(1, hello(b'b') + attach() + req()) + tick(40) + tick(1) + data(0, rel()),
    'holder_closes': bytes([1]) + data(0, hello() + attach() + req()) +
    data(1, hello(b'b') + attach() + req()) + close(0) + data(1, rel()),
    'control': bytes([1]) + data(0, hello() + attach()) +
    data(2, status() + ctl_set(-1, 2, 300) + ctl_set(0, 3, 8 << 30) + ctl_client(0) + status()),
    'control_unprivileged': bytes([4 | 1]) + data(0, hello() + attach()) +
    data(2, ctl_set(-1, 1, 0) + ctl_client(0) + status()),
    'two_gpus': bytes([1]) + data(0, hello() + attach(0) + attach(1, b'GPU-fuzz-1') + req(0) + req(1)) +
    data(1, hello(b'b') + attach(3, b'GPU-fuzz-1') + req(3) + swap(3)) + data(0, rel(1, 1)),
    'split_frames': bytes([1]) + data(0, (hello() + attach())[:7]) +
    data(0, (hello() + attach())[7:]) + data(0, req()),
    'reattach_reopen': bytes([2]) + data(0, hello() + attach() + attach(alloc=3 << 30)) +
    reopen(0) + data(0, hello() + attach()),
    'violations': bytes([1]) + data(0, hello() + hello()) + data(1, req()) +
    data(2, status() + hello()) + data(3, frame(32, b'\0' * 12)),
}

out = 'tests/fuzz/corpus/conn'
os.makedirs(out, exist_ok=True)
for name, b in seeds.items():
    with open(os.path.join(out, name), 'wb') as f:
        f.write(b)
print(f'{len(seeds)} seeds in {out}')
