"""The C library's heap: glibc functions by name, and giving free heap memory back.

Loading a bundle parses JSON (the 65,001-piece vocabulary) and lets ONNX Runtime prepack
weights; what those free lies in the middle of the heap, where glibc keeps it unless
asked (`malloc_trim`). Elsewhere than on glibc these do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _c_library() -> ctypes.CDLL | None:
    """The C library, looked up once (`find_library` may run ldconfig), or None."""
    library = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(library) if library else None
    except OSError:
        return None


def glibc_function(name: str) -> Callable[..., int] | None:
    """The C library's function `name`, or None where the C library does not have it."""
    return getattr(_c_library(), name, None)


def trim_heap() -> bool:
    """Give the heap's free pages back to the system (glibc's `malloc_trim(0)`); whether
    any memory was released (False where the C library is not glibc)."""
    malloc_trim = glibc_function("malloc_trim")
    return bool(malloc_trim(0)) if malloc_trim is not None else False
