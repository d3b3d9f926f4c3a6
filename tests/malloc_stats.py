"""What glibc's malloc holds: for tests that measure memory outside Python's own heap
(OpenSSL's, c-ares's)."""

from __future__ import annotations

import ctypes


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
