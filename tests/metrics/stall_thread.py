#!/usr/bin/env python3
"""stall_thread.py TID STOPPED_FILE RELEASE_FILE

Stops one thread (not its process) the way a hung event loop would look:
PTRACE_SEIZE + PTRACE_INTERRUPT put only that thread into a ptrace-stop,
while the process's other threads (the scheduler's HTTP thread) run on.
Writes STOPPED_FILE once stopped, detaches when RELEASE_FILE appears (or
after 60 s), and exits. Needs ptrace permission (root in the tests)."""
import ctypes
import os
import sys
import time

PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
tid, stopped, release = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for req in (PTRACE_SEIZE, PTRACE_INTERRUPT):
    if libc.ptrace(req, tid, None, None) != 0:
        sys.exit(f"ptrace {req:#x} on {tid}: {os.strerror(ctypes.get_errno())}")
os.waitpid(tid, 0x40000000)  # __WALL: the interrupt stop
with open(stopped, "w") as f:
    f.write("stopped\n")
end = time.monotonic() + 60
while not os.path.exists(release) and time.monotonic() < end:
    time.sleep(0.05)
libc.ptrace(PTRACE_DETACH, tid, None, None)
