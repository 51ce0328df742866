"""Give freed heap memory back to the operating system.

glibc keeps the pages a big load or a pass freed (an index rebuilt from 10^4 facts, a
pass over many groups), so a node's RSS stays at its high-water mark for good. Asking
malloc to trim after those moments keeps the sidecar's resident memory near what it
really holds. A no-op where the C library has no malloc_trim (musl, macOS)."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

_libc = None


def release_freed_memory() -> None:
    global _libc
    gc.collect()
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _libc.malloc_trim(0)
    except (OSError, AttributeError):  # no glibc: nothing to trim
        pass
