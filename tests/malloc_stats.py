"""Memory measures for tests: what Python's heap holds since a point (:func:`traced`),
and what glibc's malloc holds, for memory outside it (OpenSSL's, c-ares's)."""

from __future__ import annotations

import ctypes
import gc
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def traced() -> Iterator[Callable[[], int]]:
    """Trace Python's allocations in the block; what it gives reads the bytes allocated
    since the block began and still held (after a collection, so cyclic garbage is not
    counted)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]

        def held() -> int:
            gc.collect()
            return tracemalloc.get_traced_memory()[0] - before

        yield held
    finally:
        tracemalloc.stop()


def malloced() -> int | None:
    """Bytes glibc's malloc has handed out and not had back (Python's, OpenSSL's,
    c-ares's); None without glibc's ``mallinfo2``."""

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]  # fmt: skip

    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except AttributeError:
        return None
    mallinfo2.restype = MallInfo2
    info = mallinfo2()
    return int(info.uordblks + info.hblkhd)
