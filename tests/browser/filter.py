#!/usr/bin/env python3
"""Prints "N HASH" for the seccomp filter process PID runs under: N its
BPF instructions, HASH the first 16 hex digits of their SHA-256.  Root
only: it stops the process with PTRACE_SEIZE and PTRACE_INTERRUPT, reads
the filter with PTRACE_SECCOMP_GET_FILTER and lets it go.  "none" when
the process has no filter; exit 1 with a one-line reason otherwise.

usage: filter.py PID
"""
import ctypes
import hashlib
import os
import sys

SEIZE, INTERRUPT, DETACH, GET_FILTER = 0x4206, 0x4207, 17, 0x420C
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                        ctypes.c_void_p]


def main():
    pid = int(sys.argv[1])
    if libc.ptrace(SEIZE, pid, None, None) != 0:
        sys.exit("filter.py: seize: " + os.strerror(ctypes.get_errno()))
    try:
        libc.ptrace(INTERRUPT, pid, None, None)
        os.waitpid(pid, 0x40000000)  # __WALL
        n = libc.ptrace(GET_FILTER, pid, None, None)
        if n < 0:
            e = ctypes.get_errno()
            if e == 2:  # ENOENT: no filter at index 0
                print("none")
                return
            sys.exit("filter.py: get: " + os.strerror(e))
        buf = ctypes.create_string_buffer(n * 8)
        libc.ptrace(GET_FILTER, pid, None, buf)
    finally:
        libc.ptrace(DETACH, pid, None, None)
    print(n, hashlib.sha256(buf.raw).hexdigest()[:16])


main()
