"""Give freed heap memory back to the operating system.

glibc keeps the pages a big load or a pass freed (an index rebuilt from 10^4 facts, a
pass over many groups), so a node's RSS stays at its high-water mark for good. Asking
malloc to trim after those moments keeps the sidecar's resident memory near what it
really holds. A no-op where the C library has no malloc_trim (musl, macOS).

A full collection and a trim cost milliseconds on a sidecar's heap, so work that runs
often (a pass a second at 1,000 results/s) asks only when the process grew by enough to
be worth giving back: a pass that allocated little has little to return, and glibc
reuses what it freed for the next one."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os

# Growth worth a collection and a trim for work that runs often (passes, the logger).
WORTH_RELEASING_MB = 8.0

_libc = None
_resident_after_release = 0  # bytes, as read after the last release (0: none yet)


def resident_bytes() -> int | None:
    """This process's resident memory, or None where /proc does not say (not Linux)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def release_freed_memory(min_growth_mb: float = 0.0) -> bool:
    """Collect and trim; with min_growth_mb, only if resident memory grew by at least
    that much since the last release (or cannot be read). True if it released."""
    global _libc, _resident_after_release
    if min_growth_mb > 0:
        resident = resident_bytes()
        if resident is not None and \
                resident - _resident_after_release < min_growth_mb * 1024 * 1024:
            return False
    gc.collect()
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _libc.malloc_trim(0)
    except (OSError, AttributeError):  # no glibc: nothing to trim
        pass
    _resident_after_release = resident_bytes() or 0
    return True
